"""Writes dev_structure.jsonl: the dev set the person/system, meeting and multilingual lexicon was
tuned on (issue 31). The published evaluation never reads it (tests/labels/data/ is held out)."""

import json
from pathlib import Path

LIST = [["List-Id", "<news.example.com>"], ["List-Unsubscribe", "<https://example.com/u>"],
        ["Precedence", "bulk"]]
SES = [["Feedback-ID", "1.eu-west-1.abc:AmazonSES"], ["Message-ID", "<0102@eu-west-1.amazonses.com>"]]
SG = [["X-SG-EID", "abc"], ["Message-ID", "<x@geopod-ismtpd-1.sendgrid.net>"]]
MC = [["X-Mailchimp-Campaign", "c1"], ["List-Unsubscribe", "<https://x.us1.list-manage.com/u>"]]
AUTO = [["Auto-Submitted", "auto-generated"]]
TB = [["User-Agent", "Mozilla Thunderbird 115.3"]]
AM = [["X-Mailer", "Apple Mail (2.3731)"]]
OL = [["X-Mailer", "Microsoft Outlook 16.0"]]


def row(i, frm, name, subject, text, headers=(), html=False, reply="", **labels):
    return {"id": f"d{i:03d}", "from_address": frm, "from_name": name, "subject": subject,
            "text": text, "headers": [list(h) for h in headers], "html": html,
            "in_reply_to": reply,
            "labels": {"person": False, "meeting": False, "security_alert": False,
                       "invoice_receipt": False, **labels}}


ROWS = [
    row(1, "jan.peters@outlook.example", "Jan Peters", "Re: Angebot Küche",
        "Hallo Frau Yilmaz,\n\ndanke für Ihre Rückmeldung. Ich kann am Donnerstag gegen 10 Uhr vorbeikommen und ausmessen, passt Ihnen das?\n\nViele Grüße\nJan Peters\n\nAm 03.05.2024 um 18:12 schrieb Ayla Yilmaz:\n> Hallo Herr Peters, wann hätten Sie Zeit?",
        OL, reply="<a@b>", person=True, meeting=True),
    row(2, "no-reply@konto.example.de", "MeinKonto", "Neue Anmeldung bei Ihrem Konto",
        "Hallo,\n\nwir haben eine neue Anmeldung bei Ihrem MeinKonto-Konto festgestellt.\nGerät: Firefox unter Windows\nOrt: Köln, Deutschland\n\nWaren Sie das nicht? Ändern Sie sofort Ihr Passwort.\n\nIhr MeinKonto-Team",
        SES, html=True, person=False, security_alert=True),
    row(3, "securite@banque-ciel.example.fr", "Banque Ciel", "Nouvelle connexion à votre espace client",
        "Bonjour,\n\nUne connexion à votre espace client a eu lieu depuis un nouvel appareil le 12/03 à 21h04 (Lyon, France).\n\nSi ce n'est pas vous, contactez-nous immédiatement et modifiez votre mot de passe.\n\nCeci est un message automatique, merci de ne pas y répondre.",
        AUTO, html=True, person=False, security_alert=True),
    row(4, "seguranca@pagafacil.example.br", "PagaFácil", "Alerta: sua senha foi alterada",
        "Olá, Marcos\n\nA senha da sua conta PagaFácil foi alterada hoje às 09:41.\n\nSe não foi você, redefina sua senha agora e fale com nosso atendimento.\n\nEquipe PagaFácil",
        SG, html=True, person=False, security_alert=True),
    row(5, "account@id.shopmori.example.jp", "ショップモリ", "【重要】新しいデバイスからのログインがありました",
        "ショップモリをご利用いただきありがとうございます。\n\nお客様のアカウントに新しいデバイスからのログインがありました。\n日時：2024年6月2日 22:15\n端末：iPhone\n\nお心当たりがない場合は、すぐにパスワードを変更してください。\n\n※このメールは送信専用です。",
        SES, html=True, person=False, security_alert=True),
    row(6, "kenji.sato@mail.example.jp", "佐藤 健二", "来週の打ち合わせについて",
        "田中さん\n\nお疲れ様です。佐藤です。\n来週の打ち合わせですが、火曜日の午後はいかがでしょうか。\nご都合を教えてください。\n\nよろしくお願いします。\n佐藤",
        AM, person=True, meeting=True),
    row(7, "lucia.bianchi@posta.example.it", "Lucia Bianchi", "fattura di marzo",
        "Ciao Marco,\n\nho controllato la fattura di marzo che mi hai mandato: manca il numero di partita IVA. Potresti correggerla e rimandarmela?\n\nGrazie mille,\nLucia",
        TB, person=True, invoice_receipt=False),
    row(8, "ruben@devries.example.nl", "Ruben de Vries", "koffie volgende week?",
        "Hoi Sanne,\n\nZin om volgende week een keer koffie te drinken? Woensdag of donderdag na vijven kan ik wel.\n\nLaat even weten wat jou uitkomt!\n\nGroetjes,\nRuben",
        person=True, meeting=True),
    row(9, "news@bloemenhuis.example.nl", "Bloemenhuis", "Lentekriebels: 20% korting op alle tulpen",
        "Bekijk deze e-mail in je browser\n\nDe lente is begonnen! Deze week krijg je 20% korting op alle tulpen.\n\nShop nu: https://bloemenhuis.example.nl/tulpen\n\nUitschrijven | Privacybeleid\n© 2024 Bloemenhuis B.V. Alle rechten voorbehouden.",
        MC + LIST, html=True, person=False, newsletter_marketing=True),
    row(10, "carla.mendes@correio.example.pt", "Carla Mendes", "Re: nota fiscal",
        "Oi Pedro,\n\nrecebi a nota fiscal, obrigada! Só uma dúvida: o valor do frete não deveria estar separado? Me avisa quando puder.\n\nBeijos,\nCarla\n\nEnviado do meu iPhone",
        reply="<x@y>", person=True, invoice_receipt=False),
    row(11, "ana.garcia@empresa.example.es", "Ana García", "¿Nos reunimos el jueves?",
        "Hola Luis:\n\n¿Te parece si nos reunimos el jueves a las 11 para revisar el presupuesto? Si no te va bien, dime otra hora.\n\nUn saludo,\nAna",
        OL, person=True, meeting=True),
    row(12, "calendar-notification@agenda.example.com", "Agenda", "Invitation: Quarterly review @ Mon 14 Oct 15:00",
        "You have been invited to the following event.\n\nQuarterly review\nWhen: Mon 14 Oct 2024 15:00 – 16:00\nJoin: https://meet.example.com/abc-defg\n\nGoing? Yes - Maybe - No\n\nInvitation from Agenda. You are receiving this email because you are an attendee of this event.",
        AUTO, html=True, person=False, meeting=True),
    row(13, "noreply@facturas.example.es", "Luz Hogar", "Tu factura de mayo ya está disponible",
        "Hola Luis,\n\nYa puedes consultar tu factura de electricidad de mayo.\nImporte: 54,20 €\nFecha de cargo: 05/06/2024\n\nGracias por confiar en Luz Hogar.\nPor favor, no responda a este correo.",
        SES, html=True, person=False, invoice_receipt=True),
    row(14, "tom@tomsmith.example", "Tom Smith", "invoice question",
        "Hi Anna,\n\nquick one - I haven't received the invoice for the illustrations yet. Could you send it again? Our accounts team needs it before Friday.\n\nThanks!\nTom",
        AM, person=True, invoice_receipt=False),
    row(15, "security@cloudpanel.example.io", "CloudPanel", "Security alert: new sign-in from Chrome on Linux",
        "We noticed a new sign-in to your CloudPanel account.\n\nBrowser: Chrome on Linux\nLocation: Warsaw, Poland\nIP: 203.0.113.17\n\nIf this was you, you can ignore this email. If not, secure your account now.",
        SG, html=True, person=False, security_alert=True),
    row(16, "marie.dubois@exemple.fr", "Marie Dubois", "Re: dîner samedi",
        "Coucou !\n\nSuper, samedi ça marche pour nous. On apporte le dessert ? Dis-moi à quelle heure on peut venir.\n\nBises,\nMarie\n\nLe 4 juin 2024 à 19:02, Claire a écrit :\n> Vous êtes libres samedi soir ?",
        reply="<m@n>", person=True, meeting=True),
    row(17, "info@stadtwerke.example.de", "Stadtwerke", "Ihre Abschlagsrechnung",
        "Sehr geehrte Kundin, sehr geehrter Kunde,\n\nanbei erhalten Sie Ihre Abschlagsrechnung für Juni.\nBetrag: 78,00 €\n\nDiese E-Mail wurde automatisch erstellt. Bitte nicht antworten.",
        html=True, person=False, invoice_receipt=True),
    row(18, "max.huber@firma.example.de", "Max Huber", "Kurze Frage zur Rechnung",
        "Hallo Frau Keller,\n\nin Ihrer Rechnung vom 3. Mai ist die Anzahl der Stunden falsch, es waren 12 statt 14. Könnten Sie das bitte korrigieren?\n\nBeste Grüße\nMax Huber",
        OL, person=True, invoice_receipt=False),
    row(19, "notifications@teamboard.example.com", "Teamboard", "Priya commented on 'Launch checklist'",
        "Priya Nair commented on Launch checklist:\n\n\"Can we move the QA sign-off to Thursday?\"\n\nReply to this email to comment, or view it on Teamboard: https://teamboard.example.com/c/1\n\nYou're receiving this because you're watching this card. Notification settings",
        AUTO, html=True, person=False),
    row(20, "giulia.r@studio.example.it", "Giulia Rossi", "Riunione di lunedì",
        "Ciao a tutti,\n\nvi propongo di vederci lunedì alle 10 in sala riunioni per fare il punto sul progetto. Se qualcuno non può, fatemi sapere.\n\nA presto,\nGiulia",
        TB, person=True, meeting=True),
    row(21, "alerts@conta.example.pt", "Conta Digital", "Novo acesso à sua conta",
        "Detectamos um novo acesso à sua Conta Digital a partir de um dispositivo desconhecido em Porto.\n\nFoi você? Se não reconhece esta atividade, bloqueie o acesso e altere a sua palavra-passe.",
        SES, html=True, person=False, security_alert=True),
    row(22, "support@jp-bank.example.jp", "JPバンク", "パスワード変更のお知らせ",
        "JPバンクをご利用いただき、ありがとうございます。\n\nお客様のパスワードが変更されました。\n\nこの操作にお心当たりがない場合は、至急カスタマーセンターまでご連絡ください。\n\n本メールは送信専用アドレスから送信しています。",
        AUTO, html=True, person=False, security_alert=True),
]

Path(__file__).with_name("dev_structure.jsonl").write_text(
    "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8"
)
