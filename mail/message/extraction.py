"""Deterministic extraction of verification codes and links from a received message.

Pure Python, no Django, no I/O, no randomness: the same input always gives the same output, and
no ``str`` input raises. Patterns are precompiled and bounded; the only full-text passes are
``str.find`` scans for keyword stems and literal-prefixed regexes, everything else looks at a
few dozen characters around a keyword, so a 100 KB HTML body takes a few milliseconds.

``extract(subject=..., text=..., html=..., list_unsubscribe=...)`` returns an ``Extracted`` dict.

Codes
=====
Sources, in reading order: the subject, then the text body, then the HTML body rendered to text
(``mail.message.htmltext``). The HTML text is scanned even when a text body exists (text parts
are often stale or truncated); duplicates are dropped, the first occurrence wins, so ``codes``
is in reading order. Headers other than the subject, attachments and URLs are never looked at: every
``scheme://...`` URL, ``www.`` address and e-mail address is blanked out first. Text is
NFC-normalised; full-width letters and digits (``８３９２０１``, ``Ｇ-４８２９１３``, common in
Japanese and Chinese mail) are accepted in candidates and returned in ASCII.

A *candidate* stands alone (not glued to letters, digits, ``#$€£¥@&+\\``, or to a ``-/.,_``
that continues with a letter or digit, and not followed by ``%``) and is one of:

* 4 to 8 digits (``4821``, ``48291337``);
* 5 to 10 upper-case letters and digits with at least one of each (``K7Q2X``, ``G482913``);
* the same split once by ``-`` (``123-456``, ``G-482913``, ``K7Q-29X``) or by one space
  (``482 913``). Digit-only halves must be 3+3 or 4+4 (so ``555-1234`` is not a code); a
  space split needs halves of equal length with a digit in each (``IBAN DE89``, ``ZARA 0123``
  are a word and a number). A dash is kept as written, the space is removed
  (``482 913`` -> ``482913``).

A candidate counts only when a *keyword* announces it. Keywords are whole words in Latin and
Cyrillic scripts and substrings in Chinese, Japanese and Korean (written without spaces, so
``您的验证码是123456`` works): code(s), passcode, verification, verify, OTP, one-time, 2FA,
MFA, PIN, TAN (these two only in capitals), Bestätigungscode and the other German ``...code``
compounds, Einmalpasswort, vérification, usage unique, código, verificación, verificação, uso
único, codice, verifica, verificatie, verificatiecode and the other Dutch ``...code`` compounds
(bevestigingscode, beveiligingscode, inlogcode, toegangscode ...), код (кода, коду...),
подтверждения, проверочный, одноразовый, コード, 認証コード, 確認コード,
認証番号, 暗証番号, ワンタイムパスワード, 验证码, 驗證碼, 校验码, 动态码, 确认码,
安全码, 一次性密码, 인증번호, 인증 코드, 확인 코드, 보안 코드, 코드, 일회용 비밀번호.

A keyword is ignored when it is qualified as another kind of code: the word before it is promo,
discount, coupon, voucher, gift, referral, invite, error, status, postal, zip, area, country,
QR, bar, source, tracking, order, booking, product, tax, sort, bank... (also Gutschein, Rabatt,
Fehler, クーポン, エラー, バー, 优惠, 邀请, 할인, 쿠폰, 바 ...), or the words after it are "of
conduct", review, promo, postal, "de réduction", "d'erreur", "de descuento", "de seguimiento",
"de pedido", cliente, sconto, fiscale, ordine, ошибки, заказа, скидки ...

The window ("near"), in characters of the URL-stripped text:

* *after*: the first acceptable candidate starting at most 60 characters (``AFTER_WINDOW``)
  after the end of the keyword, possibly on a following line (the code in the next table row
  or paragraph) -- unless it does not directly follow the keyword and a later candidate in the
  keyword's sentence, at most 140 characters (``COPULA_WINDOW``) after it, directly follows a
  *copula* (is, ist, lautet, est, es, é, è, zijn, は, 是, ``:``, ``=``...): that one is the code
  (``passcode for the purchase of EUR 1.234,56 at MEDIAMARKT 0417 BERLIN on 27.11.2026 is
  739104``, ``Ihr Code für Sony WH-1000XM5 lautet: 730418``). Past the end of the keyword's
  sentence (``!``/``?`` before a space; ``.`` at a line end or before a space and a capital,
  not after a one-letter word, so ``Nr. 4455667``, ``Inc. is``, ``B.V. (`` end nothing;
  ``。！？``) only a candidate shown on a line of its own counts (the code under "Use the code
  below."; asterisks, quotes, brackets around it and a remark in parentheses after it are
  fine), not the number of the next sentence (``This code expires in 10 minutes. Reference:
  88421907``);
* *before*, only when nothing was found after: the nearest acceptable candidate starting at
  most 50 characters before the keyword, on the same line and in the same sentence
  (``482913 is your Acme code``).

Each keyword occurrence announces at most one code. To bound the work on pathological input,
at most 200 keyword occurrences (and 200 occurrences of each keyword stem) of a source are
examined. In addition, when the *subject* contains a keyword, a body line that holds
nothing but a candidate is a code (the big code of a "Your verification code" mail whose body
never says "code").

A candidate is rejected when:

* the words right before it name another kind of number or code (order, invoice, booking,
  reservation,
  reference, ticket, tracking, shipment, parcel, account, customer, member, user, ID,
  transaction, card, serial, model, SKU, item, version, build, phone, tel, fax, call, zip,
  postal, room, flight, error, promo, coupon, total, price, a currency code, "ending in"... and
  Bestellnummer, Rechnung, Kundennummer, commande, facture, pedido, factura, заказ, счёт,
  注文番号, 订单号, 주문번호 ...; also in Dutch and Italian and more in German, French,
  Spanish, Portuguese and Japanese: bestelling, ordernummer, factuur, klantnummer, referentie,
  kenmerk, ordine, fattura, riferimento, spedizione, Bestellnr., Artikelnummer,
  Vorgangsnummer, Summe, référence, prix, referencia, localizador, protocolo, referência,
  合計, 金額, 伝票番号, 〒 ...), possibly followed by number/no./nº/n.º/n°/ID/di/van and ":" or
  "is", or they are a qualified code word ("order code:", "código promocional", "code de
  réduction"), or a currency symbol stands right before it, spaces apart (``€ 1299``,
  ``US$ 1500``);
* it is followed by a unit, a currency or an address (``1234 points``, ``1234 EUR``,
  ``5000円``, ``2024年``, ``1200ポイント``, ``4821 Punkte``, ``1400 Uhr``,
  ``1234 Main Street``);
* it is one end of a range (``1000–5000``, ``1200〜1500``: an en or em dash or a tilde
  between it and another number);
* it belongs to a longer run of numbers (phone numbers such as ``+49 30 1234567``,
  ``0800 123 456``: three or more groups, nine or more digits, or a leading ``+``), or it is a
  postal code in address form (``W1D 3QF``, ``K1A 0B1``, ``CA 94105``, ``D-10115 Berlin``);
  dates, times, prices, decimals and versions (``2024-05-01``, ``01.05.2024``, ``10:45``,
  ``$1234``, ``1.299,00``, ``v2.4.1``) never form a candidate in the first place;
* it is a 4-digit number from 1900 to 2099 (a year) that does not directly follow the keyword
  (``code: 2019`` is a code; ``© 2024``, ``May 5, 2024`` or ``2024 code`` are not);
* its sentence is about a promotion (``%``, "off your order", discount, coupon, promo, voucher,
  sale, checkout, deal, redeem, Rabatt, Gutschein, réduction, descuento, desconto, скидка,
  купон, 割引, クーポン, 优惠, 할인 ...), or it looks like a promo code (``SUMMER24``,
  ``WELCOME10``, ``SAVE20``) or an identifier with a known prefix (``INV-2024``, ``SKU-12345``);
* its sentence mentions an error before it (error, Fehler, erreur, erro, ошибка, エラー, 错误,
  오류 ...: ``failed with error code 0x80070005 (code 5003)``).

``code`` is the first of ``codes`` (None when there is none).

Links
=====
``links`` lists every ``<a href>`` of the HTML whose href is an http(s) URL (text: the anchor's
text, or its images' alt text when it has no text), then every http(s) URL written in the text
body (text ""), then the http(s) URLs of the ``List-Unsubscribe`` header (text ""),
de-duplicated by exact URL; the first occurrence's text and kind win. Image sources and tracking
pixels (``<img src>``), ``mailto:`` and other schemes are never links. Hrefs are kept as written
(entity-decoded, surrounding whitespace removed, redirects not followed). URLs in the text body
lose trailing punctuation and unbalanced closing brackets.

``kind`` comes from whole words. A URL is percent-decoded, camelCase is split and it is cut on
every non-alphanumeric character (``/verify-email?token=`` is verify, ``/verifyx`` is not):

* ``unsubscribe``: unsubscribe, opt out, preferences (abbestellen, désabonner, darse de baja,
  descadastrar, отписаться, 配信停止, 退订, 수신거부 ...), and every List-Unsubscribe URL;
* ``reset``: reset, forgot, recover(y), password (Passwort, mot de passe, contraseña, senha,
  пароль, パスワード, 密码, 비밀번호 ...);
* ``login``: log in, sign in, login, log on, magic link (anmelden, se connecter, iniciar
  sesión, entrar, войти, ログイン, 登录, 로그인 ...);
* ``verify``: verify, verification, confirm, activate, activation, validate (bestätigen,
  confirmer, verificar, confirmar, подтвердить, 認証, 验证, 인증 ...);
* ``other`` otherwise.

In a URL's path (and the path of a URL nested in its query, as click trackers write them), also
magic, session(s) and passwordless name ``login`` (``/sessions/magic?token=``); in a host,
a query or anchor text they name nothing (``magic.example.com``, ``/cart?session=77``).

Precedence: a List-Unsubscribe URL is always ``unsubscribe``. Otherwise the anchor text decides
first, checking unsubscribe, reset, login, verify in that order ("Sign in to reset your
password" is reset); only when the anchor text names no kind ("Continue", "Weiter", "続ける",
"Click here") is the URL examined, in the same order.

``link``: the kinds named in the subject lead, in the order their words appear (a "Reset your
password" mail makes its reset link primary even beside a "Log in" link); then verify, login,
reset, other. The primary link is the first link of the first of these kinds that has one.
Unsubscribe links are never primary; ``link`` is None when there is no other link.

Known limitations: codes in lower case or with other separators (``482.913``, ``4 8 2 9 1 3``)
are not recognised; a code in a later sentence of the keyword's line that has no keyword of its
own ("Here is your code. Enter it now: 482913") is not found, nor one after a capitalised word
that ends with a period ("for Acme Inc. Store is 4821"); a number after the keyword that nothing
marks as something else ("your code at ZARA 0123", with no "is ..." after it) is taken for the
code; one keyword announcing several codes ("your backup codes: ...") yields only the first; a
code with no keyword in its message (and none in the subject) is not found; anchor
text ignores CSS (hidden text counts).
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from itertools import islice
from typing import TypedDict
from urllib.parse import unquote

from .htmltext import fold_whitespace, parse_html

__all__ = ["AFTER_WINDOW", "BEFORE_WINDOW", "COPULA_WINDOW", "Extracted", "Link", "extract"]


class Link(TypedDict):
    url: str
    text: str
    kind: str


class Extracted(TypedDict):
    code: str | None
    link: str | None
    codes: list[str]
    links: list[Link]


AFTER_WINDOW = 60
BEFORE_WINDOW = 50
COPULA_WINDOW = 140  # a candidate right after "is"/":"... in the keyword's sentence
_REACH_AFTER = max(AFTER_WINDOW, COPULA_WINDOW)  # the farthest a keyword looks ahead
_MAX_KEYWORDS = 200
_KEYWORD_REACH = 40  # characters: no keyword is longer in ASCII text (a test checks the patterns)
_MAX_SCANNED = 1_000  # keyword matches looked at in one source at most (pathological input)

# ---------------------------------------------------------------------------------------------
# Keywords
# ---------------------------------------------------------------------------------------------

# Whole words (regex fragments, lower case). Every one contains a stem of _STEMS.
_LATIN_KEYWORDS = (
    r"codes?",
    r"pass ?codes?",
    r"verification",
    r"verify",
    r"verifying",
    r"otp",
    r"one[- ]time",
    r"2fa",
    r"mfa",
    r"pin",
    r"tan",
    r"bestätigungs-?codes?",
    r"verifizierungs-?codes?",
    r"verifikations-?codes?",
    r"sicherheits-?codes?",
    r"einmal-?codes?",
    r"anmelde-?codes?",
    r"zugangs-?codes?",
    r"aktivierungs-?codes?",
    r"authentifizierungs-?codes?",
    r"freischalt-?codes?",
    r"prüf-?codes?",
    r"login-?codes?",
    r"einmal-?passwort",
    r"einmal-?kennwort",
    r"verifizierung",
    r"verificatie",
    r"verificatie-?codes?",
    r"bevestigings-?codes?",
    r"beveiligings-?codes?",
    r"inlog-?codes?",
    r"toegangs-?codes?",
    r"activatie-?codes?",
    r"authenticatie-?codes?",
    r"eenmalige-?codes?",
    r"vérification",
    r"usage unique",
    r"c[oó]digos?",
    r"verificaci[oó]n",
    r"verificaç[aã]o",
    r"verificacao",
    r"un solo uso",
    r"uso [uú]nico",
    r"codice",
    r"verifica",
    r"код(?:ом|ов|а|у|ы)?",
    r"подтверждени[еяю]",
    r"проверочн[а-яё]*",
    r"одноразов[а-яё]*",
)
# Substrings (no word boundaries in these scripts).
_CJK_KEYWORDS = (
    "認証コード",
    "確認コード",
    "認証番号",
    "暗証番号",
    "ワンタイムパスワード",
    "ワンタイム",
    "パスコード",
    "セキュリティコード",
    "コード",
    "验证码",
    "驗證碼",
    "校验码",
    "校驗碼",
    "动态码",
    "動態碼",
    "确认码",
    "確認碼",
    "认证码",
    "認證碼",
    "安全码",
    "安全碼",
    "验证代码",
    "驗證代碼",
    "一次性密码",
    "一次性密碼",
    "인증번호",
    "인증 번호",
    "인증코드",
    "인증 코드",
    "확인코드",
    "확인 코드",
    "보안코드",
    "보안 코드",
    "일회용 비밀번호",
    "코드",
)
# Stems found with str.find before the keyword regex runs around them (fast full-text scan).
_ASCII_STEMS = (
    "cod",
    "digo",
    "verif",
    "otp",
    "2fa",
    "mfa",
    "one-time",
    "one time",
    "einmal",
    "usage unique",
    "solo uso",
    "uso u",
)
_OTHER_STEMS = (
    "vérif",
    "uso ú",
    "код",
    "подтвержд",
    "проверочн",
    "одноразов",
    "コード",
    "番号",
    "ワンタイム",
    "码",
    "碼",
    "번호",
    "코드",
)
_CASED_KEYWORDS = {"pin": "PIN", "tan": "TAN"}  # only in capitals: not "pin it", "tan"
_WORD_CHARS = "0-9a-zà-ɏͰ-ϿЀ-ӿ"


def _first_chars(words: tuple[str, ...]) -> str:
    assert all(w[0] not in "\\[(.?*+-^" for w in words), "every keyword starts with a literal"
    return "".join(sorted({w[0] for w in words}))


def _alternatives(words: tuple[str, ...]) -> str:
    return "|".join(sorted(words, key=len, reverse=True))  # the longest wins at a position


# Whole words: no word character on either side. The look-behind comes first, so that inside a
# word each position costs one test rather than a try of every alternative (much faster on
# keyword-dense text); the look-ahead on the first characters does the same between words.
_LATIN_KEYWORD_RE = re.compile(
    f"(?<![{_WORD_CHARS}])(?=[{_first_chars(_LATIN_KEYWORDS)}])"
    f"(?:{_alternatives(_LATIN_KEYWORDS)})(?![{_WORD_CHARS}])"
)
_CJK_KEYWORD_RE = re.compile(_alternatives(_CJK_KEYWORDS))  # anywhere: no word boundaries


_TOKEN_RE = re.compile(r"[^\W_]+")
_ASCII_WORD_BYTES = bytes(b if chr(b).isalnum() and b < 128 else 32 for b in range(256))


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


def _tokens(value: str) -> list[str]:
    """Lower-cased words of ``value`` (runs of letters and digits)."""
    low = value.lower()
    if low.isascii():
        return low.encode("ascii").translate(_ASCII_WORD_BYTES).decode("ascii").split()
    return _TOKEN_RE.findall(low)


# The word right before a keyword that makes it another kind of code.
_KEYWORD_QUALIFIERS = _wordset(
    """promo promotional promotion promotions discount coupon voucher gift card referral refer
    invite invitation error status response exit return postal post zip area country dialing
    dial source qr bar tracking order booking reservation product item style sku color colour
    tax sort swift bank bic iban html css embed embedded sample redemption redeem offer sale
    reward rewards cheat dress ean upc airport iata language currency gutschein rabatt aktions
    fehler reference ref invoice payment transaction customer member membership shipping shipment
    parcel"""
)
_CJK_KEYWORD_QUALIFIERS = (
    "バー",
    "クーポン",
    "プロモーション",
    "エラー",
    "割引",
    "ソース",
    "招待",
    "郵便",
    "注文",
    "商品",
    "优惠",
    "优惠券",
    "邀请",
    "错误",
    "邮政",
    "二维",
    "订单",
    "할인",
    "쿠폰",
    "프로모션",
    "오류",
    "에러",
    "우편",
    "초대",
    "추천",
    "바",
    "상품",
    "주문",
)
# The word(s) right after a keyword that make it another kind of code.
_KEYWORD_FOLLOWERS = _wordset(
    """promo promotionnel promotionnelle promocional postal postale review reviews snippet
    snippets block blocks sample samples editor base repository quality coverage example
    examples ошибки заказа купона скидки товара отслеживания приглашения промо cliente
    fiscale sconto ordine spedizione tracciamento promozionale postale prodotto articolo
    errore"""
)
_KEYWORD_FOLLOWER_PHRASES = frozenset(
    tuple(p.split())
    for p in (
        "of conduct",
        "de réduction",
        "de reduction",
        "de réduc",
        "d erreur",
        "de error",
        "de erro",
        "de descuento",
        "de desconto",
        "de promoción",
        "de promocion",
        "de promoção",
        "de promocao",
        "de cupón",
        "de cupon",
        "de cupom",
        "de seguimiento",
        "de rastreamento",
        "de rastreio",
        "de pedido",
        "de reserva",
        "de barras",
        "de parrainage",
        "de réservation",
        "de commande",
        "de suivi",
        "de l",
        "du produit",
        "de produto",
        "de producto",
        "de referido",
        "de indicação",
        "de convite",
        "de invitación",
        "d invitation",
    )
)
_CJK_KEYWORD_FOLLOWERS = ("区号", "區號")

# ---------------------------------------------------------------------------------------------
# Candidates
# ---------------------------------------------------------------------------------------------

# Full-width forms (Ｇ-４８２９１３, common in Japanese and Chinese mail) count as ASCII.
_ALNUM = "A-Za-z0-9Ａ-Ｚａ-ｚ０-９"
_UPPER = "A-Z0-9Ａ-Ｚ０-９"
_CANDIDATE_RE = re.compile(
    rf"(?<![{_ALNUM}])(?<![{_ALNUM}][-/.,_])(?<![#$€£¥₹₩₽@&+\\＃＄])"
    rf"([{_UPPER}]{{1,10}})(?:([- －])([{_UPPER}]{{1,10}}))?"
    rf"(?![{_ALNUM}%％])(?![-/.,:_][{_ALNUM}])"
)
_CAPITALS_RE = re.compile(rf"[{_UPPER}]+")  # what every candidate starts with
_FULL_WIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}
_CANDIDATE_SPAN = 24  # a candidate with its lookahead never needs more characters
_PROMO_STEMS = tuple(
    sorted(
        _wordset(
            """SAVE SALE WELCOME SUMMER WINTER SPRING FALL AUTUMN HOLIDAY XMAS BLACKFRIDAY
            CYBER FREE DEAL OFF EXTRA BONUS VIP GIFT HELLO THANKS FRIEND SPECIAL FLASH PROMO
            DISCOUNT OFFER SHIP NEWYEAR EASTER BDAY BIRTHDAY LOVE STUDENT FIRST WEEKEND MEGA
            TAKE GET SUPER BACK SCHOOL VERANO INVIERNO NAVIDAD BIENVENIDO BIENVENUE SOLDES ETE
            NOEL HIVER SOMMER WILLKOMMEN RABATT NATAL OFERTA DESCUENTO SALDO"""
        )
    )
)
_PROMO_SHAPE_RE = re.compile(r"([A-Z]{3,})[0-9]{1,4}|[0-9]{1,4}([A-Z]{3,})")  # SAVE20, 20OFF
_ID_PREFIXES = _wordset(
    """INV ORD ORDER SKU REF PO TKT TICKET CASE ERR ERROR BUG ISSUE ID ACC ACCT CUST RMA TRK BOOK
    RES REQ CVE ISO RFC COVID UTC GMT SN NO NR PR JIRA"""
)
_POSTAL_RE = re.compile(r"[A-Z]{1,2}[0-9][A-Z0-9]? [0-9][A-Z]{2}|[A-Z][0-9][A-Z] [0-9][A-Z][0-9]")

# Words that, right before a candidate, make it another kind of number.
_NEGATIVE_WORDS = _wordset(
    """order orders invoice invoices inv bill receipt booking reservation reference ref ticket
    case tracking track shipment parcel package consignment waybill awb account acct customer
    client member membership user id transaction txn payment card iban bic swift routing serial
    model sku item article art product part version ver build release rev revision phone tel
    telephone mobile cell call fax hotline whatsapp zip postal postcode plz cep room flight seat
    gate train platform promo coupon voucher error err status suite ste apt unit floor box
    postfach total amount price balance subtotal usd eur gbp chf jpy cny rmb krw rub brl inr aud
    cad bestellung bestellnummer rechnung rechnungsnummer kundennummer sendungsnummer sendung
    auftrag auftragsnummer buchung buchungsnummer telefon konto kunden fehler vorgang betrag
    commande facture réservation suivi colis compte téléphone tél dossier montant pedido
    factura reserva seguimiento cuenta cliente teléfono importe fatura encomenda rastreamento
    rastreio conta telefone valor заказ заказа заказу заказе счёт счет счета трек телефон
    телефона тел договор договора сумма итого bestellnr artikelnummer artikelnr artikel artnr
    referenz referenznummer vorgangsnummer verwendungszweck paket paketnummer trackingnummer
    summe gesamtsumme gesamtbetrag gesamt preis mwst ust steuernummer mitgliedsnummer rufnummer
    kundenservice référence réf prix tva ttc siret siren expédition envoi billet vol adhérent
    referencia envío envio localizador precio iva socio albarán protocolo referência preço cpf
    cnpj nota celular móvil ordine ordini fattura riferimento spedizione tracciamento totale
    importo prezzo telefono cellulare prenotazione pratica conto carta biglietto volo articolo
    bestelling bestelnummer ordernummer factuur factuurnummer klantnummer klant referentie
    kenmerk betalingskenmerk zending zendingnummer pakket totaal bedrag prijs telefoon
    telefoonnummer btw rekening rekeningnummer"""
)
_NEGATIVE_PHRASES = frozenset(
    tuple(p.split())
    for p in (
        "ending in",
        "ends in",
        "ending with",
        "endet auf",
        "endend auf",
        "terminant par",
        "terminée par",
        "terminada en",
        "terminado em",
        "last four",
        "last 4",
    )
)
_CONNECTORS = _wordset(
    """is ist est es é was lautet number numbers no nr num nº n nummer numéro numero número номер
    de do da des del di van º ª"""
)
_CODE_WORDS = _wordset("code codes código codigo codice код")
_NEGATIVE_CJK = (
    "注文番号",
    "注文",
    "予約番号",
    "予約",
    "請求書番号",
    "請求書",
    "追跡番号",
    "お問い合わせ番号",
    "問い合わせ番号",
    "電話番号",
    "電話",
    "会員番号",
    "订单号",
    "订单编号",
    "订单",
    "发票",
    "运单号",
    "快递单号",
    "电话",
    "手机号",
    "手机",
    "주문번호",
    "주문",
    "예약번호",
    "송장번호",
    "운송장번호",
    "전화번호",
    "전화",
    "고객번호",
    "회원번호",
    "合計",
    "小計",
    "金額",
    "価格",
    "伝票番号",
    "配送番号",
    "商品番号",
    "受付番号",
    "郵便番号",
    "〒",
)
_CURRENCY_SYMBOLS = tuple("$€£¥₹₩₽￥＄")
# One end of a range of numbers ("1000–5000", "14–16", "1200〜1500").
_RANGE_BEFORE_RE = re.compile(r"[0-9][ \t]?[–—~〜～][ \t]?$")
_RANGE_AFTER_RE = re.compile(r"[ \t]?[–—~〜～][ \t]?[0-9]")
_CJK_TRAILING = " \t\n:：#№-は이가은는을를の"
_GAP_RE = re.compile(r"[\s:#№°\-=]*(\.?)[\s:#№°\-=]*")

_NEGATIVE_AFTER_RE = re.compile(
    r"[ \t]*(?:(?:[A-Z][a-z]+[ \t]+){0,3}(?i:street|st|avenue|ave|road|rd|boulevard|blvd|lane|ln"
    r"|drive|dr|way|court|ct|place|pl|parkway|pkwy|highway|hwy)(?![^\W\d_])"
    r"|(?i:points?|pts|miles?|km|kg|mb|gb|kb|px|users?|members?|people|customers?|subscribers?"
    r"|downloads?|views?|followers?|items?|orders?|days?|hours?|minutes?|mins?|seconds?|secs?"
    r"|years?|months?|weeks?|times?|steps?|words?|characters?|digits?|reviews?|stars?|likes?"
    r"|calories|cal|dollars?|euros?|reais|yuan|yen|usd|eur|gbp|chf|jpy|cny|rmb|krw|rub|brl"
    r"|inr|aud|cad|uhr|punkte|punten|punti|puntos|pontos|stück|stk|руб[а-яё]*)(?![^\W\d_])"
    r"|[$€£¥₹₩₽%円元원￥]|ポイント|р\.|[年月日時时分秒号號년월일시분초個个件人歳岁週周回次名点])"
)
_SEQ_LEFT_RE = re.compile(r"(\+?)(?<![A-Za-z0-9])((?:[0-9]+[ ./\-])*[0-9]+) $")
_SEQ_RIGHT_RE = re.compile(r" ([0-9]+(?:[ ./\-][0-9]+)*)(?![A-Za-z])")
_SEQ_SPLIT_RE = re.compile(r"[ ./\-]")
_STATE_ZIP_RE = re.compile(r"(?<![A-Za-z])[A-Z]{2} $")
_CITY_RE = re.compile(r" [A-ZÄÖÜ][a-zäöüß]")
# What may stand between a keyword and a year-like number for the number to still be a code.
_DIRECT_RE = re.compile(
    r"[\s:：\-–—=]*(?:(?:is|ist|lautet|est|es|é|是|为|為|は)[\s:：\-–—=]*)?", re.I
)
_YEAR_MIN, _YEAR_MAX = 1900, 2099
# What ends the keyword's sentence for the look ahead: "!" or "?" before a space, "." before a
# line end or before a space and a capital (not "Nr. 4455667", "Inc. is", "B.V. (factuur"), or
# a CJK full stop. A "." after a one-letter word ("z. B.", "B.V.") ends nothing.
_STOP_RE = re.compile(
    r"[!?](?=\s)|[。！？]"
    r"|(?<=[^\W\d_][^\W\d_])[.](?:(?=[ \t\u00a0]*(?:\n|$))|[ \t\u00a0]+([^\W\d_]))"
)
# Right before a candidate: the word that announces the value ("... is 739104", "lautet:
# 583920", "è 618 204", "est le 5139 0826", "：４７２９１８").
_COPULA_RE = re.compile(
    r"(?:[:：=]|[は是为為]|(?<![^\W_])(?:is|ist|lautet|lauten|est|es|é|è|são|sono|zijn|are|sind"
    r"|son)(?![^\W_])(?:[ \t]+(?:le|la|el|o|il|het|der))?)[\s*\"'«「【\[(]*$",
    re.I,
)
_DISPLAY_CHARS = " \t\u3000*\"'«»「」【】()[]"  # around a code shown alone on its line

_PROMO_WORDS = _wordset(
    """discount discounts discounted coupon coupons promo promos promotion promotional promotions
    promocional promocionais promotionnel promotionnelle
    voucher vouchers sale checkout savings deal deals redeem redeemable redemption rabatt
    rabattcode gutschein gutscheincode angebot réduction remise soldes descuento descuentos
    cupón cupon oferta ofertas desconto descontos cupom promoção promocao скидка скидки скидку
    купон промокод акция акции sconto sconti promozione promozionale buono korting
    kortingscode"""
)
_ERROR_WORDS = _wordset("error errors fehler fehlercode erreur erro ошибка ошибки ошибке exception")
_ERROR_CJK = ("エラー", "错误", "錯誤", "오류", "에러")
_OFF_OBJECTS = _wordset("your the all everything order orders purchase purchases sitewide site")
_PROMO_CJK = ("割引", "クーポン", "セール", "优惠", "折扣", "打折", "促销", "할인", "쿠폰", "세일")
_SENTENCE_END_RE = re.compile(r"[.!?](?=\s|$)|[\n。！？]")
_STANDALONE_RE = re.compile(
    rf"\n[ \t\u3000]*([{_UPPER}](?:[{_UPPER} \-－]{{0,19}}[{_UPPER}])?)[ \t\u3000]*(?=\n|\Z)"
)

# ---------------------------------------------------------------------------------------------
# URLs and e-mail addresses
# ---------------------------------------------------------------------------------------------

_SCHEME_SEP_RE = re.compile("://")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_URL_TAIL_RE = re.compile(r"[^\s<>\"'`\x00-\x1f\x7f]*")
_WWW_RE = re.compile(r"www\.")
_AT_RE = re.compile("@")
_EMAIL_LOCAL = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.!#$%&'*+/=?^_`{|}~-"
)
_EMAIL_DOMAIN_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,62}\.){1,8}[A-Za-z0-9\-]{1,63}")
_TRAILING = ".,;:!?'\"”’»›)]}>*"
_LIST_UNSUBSCRIBE_RE = re.compile(r"<([^<>]*)>")

# ---------------------------------------------------------------------------------------------
# Link kinds
# ---------------------------------------------------------------------------------------------

_KIND_PRECEDENCE = ("unsubscribe", "reset", "login", "verify")
_DEFAULT_ORDER = ("verify", "login", "reset", "other")
_KIND_VOCABULARY: dict[str, tuple[str, ...]] = {
    "unsubscribe": (
        "unsubscribe",
        "unsubscribed",
        "unsubscribing",
        "unsubscription",
        "unsub",
        "opt out",
        "optout",
        "preferences",
        "préférences",
        "preferencias",
        "preferências",
        "abbestellen",
        "abmelden",
        "désabonner",
        "désabonnement",
        "désinscrire",
        "désinscription",
        "darse de baja",
        "dar de baja",
        "cancelar suscripción",
        "cancelar la suscripción",
        "descadastrar",
        "descadastre",
        "cancelar inscrição",
        "cancelar a inscrição",
        "отписаться",
        "отписка",
    ),
    "reset": (
        "reset",
        "forgot",
        "forgotten",
        "recover",
        "recovery",
        "password",
        "passwort",
        "kennwort",
        "mot de passe",
        "contraseña",
        "senha",
        "пароль",
        "пароля",
        "zurücksetzen",
        "réinitialiser",
        "réinitialisation",
        "restablecer",
        "redefinir",
        "сбросить",
        "сброс",
        "восстановить",
        "восстановление",
    ),
    "login": (
        "log in",
        "login",
        "sign in",
        "signin",
        "log on",
        "logon",
        "magic link",
        "anmelden",
        "einloggen",
        "se connecter",
        "connexion",
        "iniciar sesión",
        "iniciar sesion",
        "iniciar sessão",
        "entrar",
        "войти",
        "вход",
    ),
    "verify": (
        "verify",
        "verification",
        "confirm",
        "activate",
        "activation",
        "validate",
        "bestätigen",
        "verifizieren",
        "aktivieren",
        "confirmer",
        "vérifier",
        "valider",
        "activer",
        "confirmar",
        "verificar",
        "activar",
        "ativar",
        "validar",
        "подтвердить",
        "подтвердите",
        "активировать",
    ),
}
_KIND_CJK: dict[str, tuple[str, ...]] = {
    "unsubscribe": ("配信停止", "配信解除", "退订", "取消订阅", "수신거부", "수신 거부"),
    "reset": ("パスワード", "密码", "密碼", "비밀번호", "재설정"),
    "login": ("ログイン", "サインイン", "登录", "登入", "登錄", "로그인"),
    "verify": ("認証", "验证", "驗證", "인증"),
}
_KIND_WORDS: dict[str, str] = {}
_KIND_PHRASES: dict[str, list[tuple[tuple[str, ...], str]]] = {}
for _kind in _KIND_PRECEDENCE:
    for _entry in _KIND_VOCABULARY[_kind]:
        _words = tuple(_entry.split())
        if len(_words) == 1:
            _KIND_WORDS.setdefault(_words[0], _kind)
        else:
            _KIND_PHRASES.setdefault(_words[0], []).append((_words, _kind))
_CAMEL_RE = re.compile(r"(?<=[a-z])(?=[A-Z])")
# Words that name a login only in a URL's path (``/sessions/magic?token=``), never in its host
# or query (``magic.example.com``, ``/cart?session=77``) nor in anchor text.
_PATH_LOGIN_WORDS = frozenset({"magic", "session", "sessions", "passwordless"})
_URL_PATH_RE = re.compile(r"://[^/?#\s]*([^?#\s]*)")  # also finds the URLs nested in a query


# ---------------------------------------------------------------------------------------------
# Text preparation
# ---------------------------------------------------------------------------------------------


def _merge_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _url_spans(text: str) -> list[tuple[int, int]]:
    """Spans of ``scheme://...`` URLs and ``www.`` addresses."""
    spans: list[tuple[int, int]] = []
    last = 0
    for m in _SCHEME_SEP_RE.finditer(text):
        sep = m.start()
        if sep < last:
            continue
        start = sep
        while start > 0 and sep - start < 32 and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        if start == sep or not text[start].isalpha():
            continue
        tail = _URL_TAIL_RE.match(text, m.end())
        end = tail.end() if tail is not None else m.end()
        spans.append((start, end))
        last = end
    if "www." in text:
        last = 0
        for m in _WWW_RE.finditer(text):
            start = m.start()
            # inside the previous address: its tail already ran to the end of this one (without
            # the skip, "www.:" repeated would scan to the end of the run from every "www.")
            if start < last:
                continue
            if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "./-@"):
                continue
            tail = _URL_TAIL_RE.match(text, m.end())
            last = tail.end() if tail is not None else m.end()
            spans.append((start, last))
    return spans


def _email_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    last = 0
    for m in _AT_RE.finditer(text):
        at = m.start()
        if at < last:
            continue
        start = at
        while start > 0 and at - start < 64 and text[start - 1] in _EMAIL_LOCAL:
            start -= 1
        if start == at:
            continue
        domain = _EMAIL_DOMAIN_RE.match(text, at + 1)
        if domain is None:
            continue
        spans.append((start, domain.end()))
        last = domain.end()
    return spans


def _prepare(text: str) -> str:
    """NFC-normalise, unify newlines and blank out URLs and e-mail addresses."""
    if not text:
        return ""
    if not text.isascii() and not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    spans: list[tuple[int, int]] = []
    if "://" in text or "www." in text:
        spans = _url_spans(text)
    if "@" in text:
        spans += _email_spans(text)
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end in _merge_spans(spans):
        out.append(text[pos:start])
        out.append(" ")
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _lower(text: str) -> str:
    """``text.lower()`` keeping one character per character (positions stay comparable)."""
    low = text.lower() if "\u0130" not in text else text.replace("\u0130", "i").lower()
    if len(low) == len(text):
        return low
    return "".join(lc if len(lc := c.lower()) == 1 else c for c in text)


# ---------------------------------------------------------------------------------------------
# Codes
# ---------------------------------------------------------------------------------------------


def _is_year(value: str) -> bool:
    return len(value) == 4 and value.isdigit() and _YEAR_MIN <= int(value) <= _YEAR_MAX


def _valid_token(token: str) -> str | None:
    if token.isdigit():
        return token if 4 <= len(token) <= 8 else None
    if not 5 <= len(token) <= 10 or token.isalpha():
        return None
    shape = _PROMO_SHAPE_RE.fullmatch(token)
    if shape is not None:
        letters = shape.group(1) or shape.group(2)
        if any(letters.startswith(s) or letters.endswith(s) for s in _PROMO_STEMS):
            return None
    return token


def _ascii(value: str) -> str:
    return value if value.isascii() else value.translate(_FULL_WIDTH)


def _valid_candidate(m: re.Match[str]) -> str | None:
    """The code value of a candidate match, or None when its shape is not a code."""
    first, sep, second = _ascii(m.group(1)), m.group(2), m.group(3)
    if sep is None:
        return _valid_token(first)
    sep, second = _ascii(sep), _ascii(second)
    if first.isdigit() and second.isdigit():
        if len(first) == len(second) and len(first) in (3, 4):
            return first + second if sep == " " else f"{first}-{second}"
        return None
    if sep == " " and (
        len(first) != len(second) or len(first) < 3 or first.isalpha() or second.isalpha()
    ):
        return None
    if first in _ID_PREFIXES or second in _ID_PREFIXES:
        return None
    if sep == " " and _POSTAL_RE.fullmatch(f"{first} {second}"):
        return None  # "W1D 3QF", "K1A 0B1"
    joined = first + second
    if joined.isdigit() or _valid_token(joined) is None:
        return None
    return joined if sep == " " else f"{first}-{second}"


def _readings(m: re.Match[str]) -> tuple[list[tuple[int, int, str]], int]:
    """Code readings of a candidate match as (start, end, value), and where to search next.

    An invalid space-joined pair falls back to its first half and resumes at the second half
    (``ABC 482913`` -> ``482913``).
    """
    value = _valid_candidate(m)
    if value is not None:
        return [(m.start(), m.end(), value)], m.end()
    if m.group(2) == " ":
        first = m.group(1)
        token = _valid_token(_ascii(first))
        readings = [(m.start(), m.start() + len(first), token)] if token is not None else []
        return readings, m.start(3)
    return [], m.end()


def _negative_before(text: str, start: int) -> bool:
    """Whether the words right before ``start`` name another kind of number."""
    tail = text[max(0, start - 48) : start]
    if not tail:
        return False
    if tail.rstrip(" \t\u00a0\u202f").endswith(_CURRENCY_SYMBOLS):
        return True  # "€ 1299", "US$ 1500" (glued symbols never form a candidate)
    if not tail.isascii() and tail.rstrip(_CJK_TRAILING).endswith(_NEGATIVE_CJK):
        return True
    tokens = list(_TOKEN_RE.finditer(tail))
    index = len(tokens) - 1
    gap_end = len(tail)
    while index >= 0:
        token = tokens[index]
        word = token.group().lower()
        gap = _GAP_RE.fullmatch(tail, token.end(), gap_end)
        if gap is None or (gap.group(1) and len(word) > 4):  # other text, or a sentence end
            return False
        if word in _NEGATIVE_WORDS:
            return True
        previous = tokens[index - 1].group().lower() if index > 0 else ""
        if (previous, word) in _NEGATIVE_PHRASES:
            return True
        if word in _CODE_WORDS and previous in _KEYWORD_QUALIFIERS:
            return True  # "order code: 48213907"
        if word in _KEYWORD_FOLLOWERS and previous in _CODE_WORDS:
            return True  # "código promocional VERANO24"
        before_previous = tokens[index - 2].group().lower() if index > 1 else ""
        if (previous, word) in _KEYWORD_FOLLOWER_PHRASES and before_previous in _CODE_WORDS:
            return True  # "código de descuento X"
        if word not in _CONNECTORS:
            return False
        gap_end = token.start()
        index -= 1
    return False


def _in_number_run(text: str, start: int, end: int, value: str) -> bool:
    """Whether a digit candidate is part of a longer run of numbers (a phone number...)."""
    digits = value.replace("-", "")
    if not digits.isdigit():
        return False
    groups, total, dotted = (2 if "-" in value or end - start > len(digits) else 1), len(digits), 0
    left = _SEQ_LEFT_RE.search(text, max(0, start - 40), start) if start else None
    right = _SEQ_RIGHT_RE.match(text, end, end + 40)
    if left is None and right is None:
        return False
    for run in (left.group(2) if left else "", right.group(1) if right else ""):
        if run:
            parts = _SEQ_SPLIT_RE.split(run)
            groups += len(parts)
            total += sum(len(p) for p in parts)
            dotted += run.count(".") + run.count("/")
    plus = left is not None and left.group(1) == "+"
    return plus or dotted > 0 or groups >= 3 or total >= 9


def _in_range(text: str, start: int, end: int) -> bool:
    """Whether the candidate is one end of a range ("1000–5000", "1200〜1500")."""
    if _RANGE_AFTER_RE.match(text, end, end + 3) is not None:
        return True
    return _RANGE_BEFORE_RE.search(text, max(0, start - 3), start) is not None


def _is_postal(text: str, start: int, end: int, value: str) -> bool:
    if len(value) == 5 and value.isdigit() and _STATE_ZIP_RE.search(text, max(0, start - 4), start):
        return True  # "CA 94105"
    if "-" in value:
        first, _, second = value.partition("-")
        if len(first) <= 2 and first.isalpha() and second.isdigit():
            return _CITY_RE.match(text, end) is not None  # "D-10115 Berlin"
    return False


def _sentence_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    left = max(0, start - 80)
    for m in _SENTENCE_END_RE.finditer(text, left, start):
        left = m.end()
    m = _SENTENCE_END_RE.search(text, end, min(len(text), end + 80))
    right = m.start() if m is not None else min(len(text), end + 80)
    return left, right


def _is_promotional(sentence: str) -> bool:
    if "%" in sentence:
        return True
    words = _tokens(sentence)
    if not _PROMO_WORDS.isdisjoint(words):
        return True
    for i, word in enumerate(words[:-1]):
        if word == "off" and words[i + 1] in _OFF_OBJECTS:
            return True
    return not sentence.isascii() and any(w in sentence for w in _PROMO_CJK)


def _mentions_error(text: str) -> bool:
    if not _ERROR_WORDS.isdisjoint(_tokens(text)):
        return True
    return not text.isascii() and any(w in text for w in _ERROR_CJK)


class _Scanner:
    """Finds the codes announced in one prepared source text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.low = _lower(text)
        self._runs: tuple[list[int], list[int]] | None = None

    def _reaches_code(self, kw_start: int, kw_end: int) -> bool:
        """Whether :meth:`announced` could find anything for this keyword.

        Every candidate starts with a digit or a capital letter: a keyword with none of them
        within reach (most keywords in running text) needs no regular expression at all. Else
        the first search ``announced`` makes after the keyword, and a search before it from the
        widest start it uses, tell.
        """
        after = (kw_end, kw_end + _REACH_AFTER + 1)
        before = (max(0, kw_start - BEFORE_WINDOW), kw_start)
        if not (self._capitals_in(*after) or self._capitals_in(*before)):
            return False
        text = self.text
        stop = min(len(text), kw_end + _REACH_AFTER + _CANDIDATE_SPAN)
        found = _CANDIDATE_RE.search(text, kw_end, stop)
        if found is not None and found.start() <= kw_end + _REACH_AFTER:
            return True
        return _CANDIDATE_RE.search(text, *before) is not None

    def _capital_runs(self) -> tuple[list[int], list[int]]:
        """Starts and ends of the runs of digits and capital letters, in order."""
        if self._runs is None:
            runs = [m.span() for m in _CAPITALS_RE.finditer(self.text)]
            self._runs = ([start for start, _ in runs], [end for _, end in runs])
        return self._runs

    def _capitals_in(self, lo: int, hi: int) -> bool:
        """Whether a digit or capital letter (what every candidate starts with) lies in lo:hi."""
        starts, ends = self._capital_runs()
        index = bisect.bisect_left(starts, hi) - 1  # the last run starting before hi
        return index >= 0 and ends[index] > lo

    def _regions(self) -> list[tuple[int, int]]:
        low, text = self.low, self.text
        hits: list[tuple[int, int]] = []
        stems = _ASCII_STEMS if low.isascii() else _ASCII_STEMS + _OTHER_STEMS
        for stem in stems:
            i, count = low.find(stem), 0
            while i >= 0 and count < _MAX_KEYWORDS:
                hits.append((max(0, i - 32), i + len(stem) + 32))
                i, count = low.find(stem, i + 1), count + 1
        for cased in _CASED_KEYWORDS.values():
            i, count = text.find(cased), 0
            while i >= 0 and count < _MAX_KEYWORDS:
                hits.append((max(0, i - 1), i + len(cased) + 1))
                i, count = text.find(cased, i + 1), count + 1
        return _merge_spans(hits)

    def keywords(self, *, near_codes: bool = False) -> list[tuple[int, int]]:
        """Keyword occurrences (start, end) in order, without the disqualified ones; with
        ``near_codes``, only those with a code candidate within reach."""
        found: list[tuple[int, int]] = []
        text, low = self.text, self.low
        for start, end in self._keyword_spans(near_codes=near_codes):
            cased = _CASED_KEYWORDS.get(low[start:end])
            if cased is not None and text[start:end] != cased:
                continue
            if near_codes and not self._reaches_code(start, end):
                continue
            if self._qualified(start, end):
                continue
            found.append((start, end))
            if len(found) >= _MAX_KEYWORDS:
                return found
        return found

    def _keyword_spans(self, *, near_codes: bool = False) -> list[tuple[int, int]]:
        """Spans of the keyword regular expressions in the regions around stems, in order; with
        ``near_codes``, every keyword where a keyword could reach a code from (:meth:`_reach`)."""
        low = self.low
        spans: list[tuple[int, int]] = []
        cjk = not low.isascii()
        for lo, hi in self._reach() if near_codes else self._regions():
            hi = min(hi, len(low))
            left = _MAX_SCANNED - len(spans)  # pathological input: bounded like the stem scan
            spans += [m.span() for m in islice(_LATIN_KEYWORD_RE.finditer(low, lo, hi), left)]
            if cjk:
                spans += [m.span() for m in islice(_CJK_KEYWORD_RE.finditer(low, lo, hi), left)]
            if len(spans) >= _MAX_SCANNED:
                break
        if cjk:
            spans.sort()
        return spans

    def _reach(self) -> list[tuple[int, int]]:
        """Where a keyword that reaches a code can be found, as merged (start, end) spans.

        Exact: :meth:`_reaches_code` keeps a keyword at ``s:e`` only if a run of digits or
        capitals (what every candidate starts with) at ``a:b`` meets ``e : e + _REACH_AFTER + 1``
        or ``s - BEFORE_WINDOW : s``; then the keyword meets ``a - _REACH_AFTER - 1 : b +
        BEFORE_WINDOW``, the run's *zone*. In ASCII text no keyword is longer than
        ``_KEYWORD_REACH`` (``tests/mail/test_extraction.py`` checks the patterns), so it lies
        within its zone widened by that on both sides; the regular expressions see the text before
        a span's start, and a match cut short at a span's end lies outside every zone, so
        :meth:`_reaches_code` drops it. Otherwise (Cyrillic keywords have no bounded length) the
        span is the zone's whole lines: no keyword spans a line break, and a whole line gives the
        matches the whole text gives. On keyword-dense text (a long mail of "confirm your
        account" prose around one code) these are the few words around the code, and a text
        without a digit or capital has none.
        """
        low, size = self.low, len(self.low)
        starts, ends = self._capital_runs()
        bounded = low.isascii()
        widen = _KEYWORD_REACH if bounded else 0
        spans: list[tuple[int, int]] = []
        run = 0
        while run < len(starts):
            lo = max(0, starts[run] - _REACH_AFTER - 1 - widen)
            hi = min(size, ends[run] + BEFORE_WINDOW + widen)
            if not bounded:
                lo = low.rfind("\n", 0, lo) + 1
                line_end = low.find("\n", hi)
                hi = size if line_end < 0 else line_end
            if spans and lo <= spans[-1][1]:
                spans[-1] = (spans[-1][0], max(hi, spans[-1][1]))
            else:
                spans.append((lo, hi))
            # The runs whose widened zone ends within this span add nothing (runs are in order).
            run = bisect.bisect_left(ends, spans[-1][1] - BEFORE_WINDOW - widen + 1, run + 1)
        return spans

    def _qualified(self, start: int, end: int) -> bool:
        """Whether the keyword at start:end is qualified as another kind of code."""
        low = self.low
        before = low[max(0, start - 30) : start].rstrip(" \t\n-")
        if before:
            if not before.isascii() and before.endswith(_CJK_KEYWORD_QUALIFIERS):
                return True
            words = _tokens(before[-24:])
            if words and before.endswith(words[-1]) and words[-1] in _KEYWORD_QUALIFIERS:
                return True
        after = low[end : end + 40].lstrip(" \t\n:-")
        if after:
            if not after.isascii() and after.startswith(_CJK_KEYWORD_FOLLOWERS):
                return True
            words = _tokens(after)
            if (
                words
                and after.startswith(words[0])
                and (
                    words[0] in _KEYWORD_FOLLOWERS or tuple(words[:2]) in _KEYWORD_FOLLOWER_PHRASES
                )
            ):
                return True
        return False

    def acceptable(self, start: int, end: int, value: str, keyword_end: int | None) -> bool:
        """Context checks for a candidate (``keyword_end`` is set when it follows the keyword)."""
        text = self.text
        if _negative_before(text, start):
            return False
        if _NEGATIVE_AFTER_RE.match(text, end, end + 60) is not None:
            return False
        if _in_number_run(text, start, end, value) or _is_postal(text, start, end, value):
            return False
        if _in_range(text, start, end):
            return False
        if _is_year(value):
            if keyword_end is None:
                return False
            direct = _DIRECT_RE.match(text, keyword_end, start)
            if direct is None or direct.end() != start:
                return False
        left, right = _sentence_bounds(text, start, end)
        return not _is_promotional(text[left:right]) and not _mentions_error(text[left:start])

    def _displayed(self, start: int, end: int) -> bool:
        """Whether the candidate at start:end is shown on a line of its own: nothing but
        spaces, asterisks, quotes or brackets around it, or a remark in parentheses after it
        (``482913 (valid for 10 minutes)``)."""
        text = self.text
        lo = max(0, start - 24)
        line_start = text.rfind("\n", lo, start) + 1
        if (line_start == 0 and lo > 0) or text[line_start:start].strip(_DISPLAY_CHARS):
            return False
        rest = text[end : end + 24].lstrip(" \t\u3000*\"'»」】)]")
        return not rest or rest[0] in "\n(（"

    def _follows_copula(self, kw_end: int, start: int) -> bool:
        """Whether the candidate at ``start`` directly follows the keyword ending at ``kw_end``
        or an "is", ":" ... after it."""
        text = self.text
        direct = _DIRECT_RE.match(text, kw_end, start)
        if direct is not None and direct.end() == start:
            return True
        return _COPULA_RE.search(text, max(kw_end, start - 24), start) is not None

    def _after(self, kw_end: int) -> tuple[int, str] | None:
        """The code announced after the keyword ending at ``kw_end``, as (position, value).

        The first acceptable candidate within ``AFTER_WINDOW`` unless a candidate further on in
        the keyword's sentence (within ``COPULA_WINDOW``) directly follows "is", ":" ... and the
        first one does not ("your code for order 4455667 at store 0412 is 608213"). After the
        end of the keyword's sentence only a candidate shown on its own line counts (the code under
        "Use the code below."), not the number of the next sentence ("This code expires in 10
        minutes. Reference: 88421907").
        """
        text = self.text
        limit = kw_end + _REACH_AFTER
        near = kw_end + AFTER_WINDOW
        sentence_end = len(text)
        for stop_match in _STOP_RE.finditer(text, kw_end, min(len(text), limit)):
            following = stop_match.group(1)  # the letter after ". ", when there is one
            if following is None or following.isupper():
                sentence_end = stop_match.start()
                break
        first: tuple[int, str] | None = None
        pos, stop = kw_end, min(len(text), limit + _CANDIDATE_SPAN)
        while (m := _CANDIDATE_RE.search(text, pos, stop)) is not None and m.start() <= limit:
            if m.start() > sentence_end and (first is not None or m.start() > near):
                break
            readings, pos = _readings(m)
            for start, end, value in readings:
                same_sentence = start < sentence_end
                if not same_sentence and not self._displayed(start, end):
                    continue
                if start > near and not same_sentence:
                    continue
                copula = same_sentence and self._follows_copula(kw_end, start)
                if start > near and not copula:
                    continue
                if not self.acceptable(start, end, value, kw_end):
                    continue
                if copula:
                    return start, value
                if not same_sentence:  # shown on its own line after the sentence
                    return first or (start, value)
                if first is None:
                    first = (start, value)
        return first

    def announced(self, kw_start: int, kw_end: int) -> tuple[int, str] | None:
        """The code announced by the keyword at ``kw_start:kw_end`` as (position, value)."""
        text = self.text
        if not self._reaches_code(kw_start, kw_end):
            return None
        after = self._after(kw_end)
        if after is not None:
            return after
        # before the keyword (same line, same sentence): the nearest acceptable candidate
        lo = max(0, kw_start - BEFORE_WINDOW)
        for sentence_end in _SENTENCE_END_RE.finditer(text, lo, kw_start):
            lo = sentence_end.end()
        best: tuple[int, str] | None = None
        pos = lo
        while pos < kw_start and (m := _CANDIDATE_RE.search(text, pos, kw_start)) is not None:
            readings, pos = _readings(m)
            for start, end, value in readings:
                if self.acceptable(start, end, value, None):
                    best = (start, value)
        return best

    def standalone(self) -> list[tuple[int, str]]:
        """Lines holding nothing but a candidate (used when the subject announces a code)."""
        found: list[tuple[int, str]] = []
        text = "\n" + self.text  # one leading newline: positions below are shifted by one
        for line in _STANDALONE_RE.finditer(text):
            m = _CANDIDATE_RE.fullmatch(line.group(1))
            if m is None:
                continue
            value = _valid_candidate(m)
            start, end = line.start(1) - 1, line.end(1) - 1
            if value is None or _is_year(value):
                continue
            if _negative_before(self.text, start) or _in_number_run(self.text, start, end, value):
                continue
            if _NEGATIVE_AFTER_RE.match(self.text, end, end + 60) is not None:
                continue
            found.append((start, value))
        return found


def _codes_in(scanner: _Scanner, keywords: list[tuple[int, int]], standalone: bool) -> list[str]:
    found: dict[int, str] = {}
    for kw_start, kw_end in keywords:
        hit = scanner.announced(kw_start, kw_end)
        if hit is not None:
            found.setdefault(hit[0], hit[1])
    if standalone:
        for position, value in scanner.standalone():
            found.setdefault(position, value)
    return [found[p] for p in sorted(found)]


def _find_codes(subject: str, bodies: list[str]) -> list[str]:
    codes: list[str] = []
    subject_scanner = _Scanner(_prepare(subject))
    subject_keywords = subject_scanner.keywords()
    for value in _codes_in(subject_scanner, subject_keywords, standalone=False):
        if value not in codes:
            codes.append(value)
    # A subject such as "Your verification code" announces a code standing alone on a line.
    announces = bool(subject_keywords) and not _is_promotional(subject)
    for body in bodies:
        prepared = _prepare(body)
        if not prepared:
            continue
        scanner = _Scanner(prepared)
        for value in _codes_in(scanner, scanner.keywords(near_codes=True), standalone=announces):
            if value not in codes:
                codes.append(value)
    return codes


# ---------------------------------------------------------------------------------------------
# Links
# ---------------------------------------------------------------------------------------------


def _is_http(url: str) -> bool:
    head = url[:8].lower()
    return head.startswith(("http://", "https://"))


def _trim_url(url: str) -> str:
    # The bracket counts are kept as the end moves (counting again on every step would be
    # quadratic in a URL ending in a long run of ")").
    end = len(url)
    opened = {")": url.count("("), "]": url.count("[")}
    closed = {")": url.count(")"), "]": url.count("]")}
    while end and url[end - 1] in _TRAILING:
        last = url[end - 1]
        if last in closed:
            if opened[last] >= closed[last]:
                break
            closed[last] -= 1
        end -= 1
    return url[:end]


def _text_urls(text: str) -> list[str]:
    """http(s) URLs written in a text body, in order."""
    urls: list[str] = []
    if not text or "://" not in text:
        return urls
    last = 0
    for m in _SCHEME_SEP_RE.finditer(text):
        sep = m.start()
        if sep < last:
            continue
        if text[max(0, sep - 5) : sep].lower() == "https":
            start = sep - 5
        elif text[max(0, sep - 4) : sep].lower() == "http":
            start = sep - 4
        else:
            continue
        if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "+.-"):
            continue
        tail = _URL_TAIL_RE.match(text, m.end())
        if tail is None:
            continue
        last = tail.end()
        url = _trim_url(text[start : tail.end()])
        if len(url) > m.end() - start:
            urls.append(url)
    return urls


def _header_urls(value: str) -> list[str]:
    """http(s) URLs of a List-Unsubscribe header value."""
    if not value:
        return []
    items = _LIST_UNSUBSCRIBE_RE.findall(value) if "<" in value else value.split(",")
    return [url for url in (item.strip() for item in items) if url and _is_http(url)]


_SUBJECT_SCAN = 4096


def _kind_positions(value: str) -> dict[str, int]:
    """Each link kind named in ``value`` (whole words) with the position of its first word.

    Only the first ``_SUBJECT_SCAN`` characters are read: a subject names its link's kind near
    its start, and a hostile megabyte of words would cost a Python step per word."""
    low = value[:_SUBJECT_SCAN].lower()
    found: dict[str, int] = {}
    matches = list(_TOKEN_RE.finditer(low))
    words = [m.group() for m in matches]
    for i, word in enumerate(words):
        kind = _KIND_WORDS.get(word)
        if kind is not None and kind not in found:
            found[kind] = matches[i].start()
        for phrase, phrase_kind in _KIND_PHRASES.get(word, ()):
            if phrase_kind not in found and tuple(words[i : i + len(phrase)]) == phrase:
                found[phrase_kind] = matches[i].start()
    if not low.isascii():
        for kind, needles in _KIND_CJK.items():
            for needle in needles:
                at = low.find(needle)
                if at >= 0 and at < found.get(kind, len(low)):
                    found[kind] = at
    return found


def _url_words(url: str) -> str:
    if "%" in url:
        url = unquote(url)
    if not url.islower():
        url = _CAMEL_RE.sub(" ", url)
    return url


def _kinds(value: str) -> set[str]:
    """The link kinds named in ``value`` (whole words)."""
    words = _tokens(value)
    found = {_KIND_WORDS[w] for w in _KIND_WORDS.keys() & words}
    if not _KIND_PHRASES.keys().isdisjoint(words):
        for i, word in enumerate(words):
            for phrase, kind in _KIND_PHRASES.get(word, ()):
                if tuple(words[i : i + len(phrase)]) == phrase:
                    found.add(kind)
    if not value.isascii():
        low = value.lower()
        found.update(k for k, needles in _KIND_CJK.items() if any(n in low for n in needles))
    return found


def _path_kinds(words: str) -> set[str]:
    """The link kinds named only by a URL's path words (``words``: :func:`_url_words`)."""
    for m in _URL_PATH_RE.finditer(words):
        if not _PATH_LOGIN_WORDS.isdisjoint(_tokens(m.group(1))):
            return {"login"}
    return set()


def _kind(url: str, text: str, unsubscribe_urls: set[str]) -> str:
    if url in unsubscribe_urls:
        return "unsubscribe"
    if text:
        found = _kinds(text)
        for kind in _KIND_PRECEDENCE:
            if kind in found:
                return kind
    words = _url_words(url)
    found = _kinds(words) | _path_kinds(words)
    for kind in _KIND_PRECEDENCE:
        if kind in found:
            return kind
    return "other"


def _collect_links(anchors: list[tuple[str, str]], text: str, list_unsubscribe: str) -> list[Link]:
    header = _header_urls(list_unsubscribe)
    unsubscribe_urls = set(header)
    links: list[Link] = []
    seen: set[str] = set()
    candidates = [(href, label) for href, label in anchors if href and _is_http(href)]
    candidates += [(url, "") for url in _text_urls(text)]
    candidates += [(url, "") for url in header]
    for url, label in candidates:
        if url not in seen:
            seen.add(url)
            links.append({"url": url, "text": label, "kind": _kind(url, label, unsubscribe_urls)})
    return links


def _primary_link(subject: str, links: list[Link]) -> str | None:
    named = _kind_positions(subject) if subject else {}
    named.pop("unsubscribe", None)
    order = sorted(named, key=lambda kind: (named[kind], _DEFAULT_ORDER.index(kind)))
    order += [kind for kind in _DEFAULT_ORDER if kind not in named]
    for kind in order:
        for link in links:
            if link["kind"] == kind:
                return link["url"]
    return None


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def extract(*, subject: str, text: str, html: str, list_unsubscribe: str = "") -> Extracted:
    """Extract verification codes and links from a message (see the module docstring)."""
    subject = fold_whitespace(subject or "")
    text = text or ""
    html_text, anchors = parse_html(html) if html else ("", [])
    bodies = [text, html_text] if text.strip() else [html_text]
    codes = _find_codes(subject, bodies)
    links = _collect_links(anchors, text, list_unsubscribe or "")
    return {
        "code": codes[0] if codes else None,
        "link": _primary_link(subject, links),
        "codes": codes,
        "links": links,
    }
