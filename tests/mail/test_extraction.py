"""Table-driven tests for ``mail.message.extraction`` over a corpus of realistic messages.

Every corpus entry states the complete expected result: ``codes`` (``code`` is their first),
``link``, and either the full ``links`` list as (url, text, kind) or the kinds of the links in
order.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mail.message import extraction
from mail.message.extraction import AFTER_WINDOW, BEFORE_WINDOW, COPULA_WINDOW, extract
from mail.message.htmltext import html_to_text
from tests.sizes import examples


@dataclass(frozen=True)
class Message:
    id: str
    subject: str
    text: str = ""
    html: str = ""
    list_unsubscribe: str = ""
    codes: tuple[str, ...] = ()
    link: str | None = None
    kinds: tuple[str, ...] = ()  # kinds of all links, in order (when ``links`` is not given)
    links: tuple[tuple[str, str, str], ...] | None = None  # full (url, text, kind) list


def _page(body: str, title: str = "Acme") -> str:
    """A typical transactional e-mail shell: head with title/style, centred 600px table."""
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>.code{{font-size:32px}} td{{padding:0}}</style>"
        "</head><body style='margin:0'><!--[if mso]><table><tr><td><![endif]-->"
        "<table role='presentation' width='100%' cellpadding='0' cellspacing='0'>"
        f"<tr><td align='center'><table width='600'>{body}</table></td></tr></table>"
        "<!--[if mso]></td></tr></table><![endif]--></body></html>"
    )


CORPUS: list[Message] = [
    # ---------------------------------------------------------------- verification codes (en)
    Message(
        id="github-device-verification",
        subject="[GitHub] Please verify your device",
        text=(
            "Hey octocat!\n\n"
            "A sign in attempt requires further verification because we did not recognize your "
            "device. To complete the sign in, enter the verification code on the unrecognized "
            "device.\n\n"
            "Device: Chrome on macOS\n"
            "Verification code: 482913\n\n"
            "If you did not attempt to sign in to your account, your password may be "
            "compromised. Visit https://github.com/settings/security to create a new, strong "
            "password for your GitHub account.\n\n"
            "Thanks,\nThe GitHub Team\n"
        ),
        codes=("482913",),
        link="https://github.com/settings/security",
        links=(("https://github.com/settings/security", "", "other"),),
    ),
    Message(
        id="slack-code-in-subject-with-dash",
        subject="Slack confirmation code: 123-456",
        html=_page(
            "<tr><td><h1>Confirm your email address</h1></td></tr>"
            "<tr><td>Your confirmation code is below — enter it in your open browser window "
            "and we'll help you get signed in.</td></tr>"
            "<tr><td class='code' style='background:#f5f4f5;font-size:30px'>123-456</td></tr>"
            "<tr><td>If you didn't request this email, there's nothing to worry about — you "
            "can safely ignore it.</td></tr>"
        ),
        codes=("123-456",),
    ),
    Message(
        id="google-prefixed-code-before-keyword",
        subject="G-482913 is your Google verification code",
        text="G-482913 is your Google verification code.\n\nDon't share it with anyone.",
        codes=("G-482913",),
    ),
    Message(
        id="instagram-code-on-its-own-line",
        subject="482913 is your Instagram code",
        text=(
            "Hi jane_doe,\n\n"
            "Someone tried to log in to your Instagram account. If this was you, please use "
            "the following code to confirm your identity:\n\n"
            "482913\n\n"
            "If this wasn't you, please reset your password:\n"
            "https://instagram.com/accounts/password/reset/?uidb36=3ab&token=5x-7d2f\n"
        ),
        codes=("482913",),
        link="https://instagram.com/accounts/password/reset/?uidb36=3ab&token=5x-7d2f",
        kinds=("reset",),
    ),
    Message(
        id="html-table-code-with-footer-noise",
        subject="Your Acme verification code",
        html=_page(
            "<tr><td><img src='https://cdn.acme.com/logo.png' alt='Acme' width='120'></td></tr>"
            "<tr><td><p>Hi Jane,</p><p>Use the verification code below to finish signing "
            "in.</p></td></tr>"
            "<tr><td><table><tr><td style='letter-spacing:8px'><strong>839201</strong></td>"
            "</tr></table></td></tr>"
            "<tr><td>This code expires in 10 minutes.</td></tr>"
            "<tr><td style='color:#999;font-size:12px'>&copy; 2024 Acme Inc. · 123 Main "
            "Street, Springfield, IL 62704 · <a href='https://acme.com/privacy'>Privacy</a>"
            "</td></tr>"
        ),
        codes=("839201",),
        link="https://acme.com/privacy",
        links=(("https://acme.com/privacy", "Privacy", "other"),),
    ),
    Message(
        id="code-with-inner-space",
        subject="Your login code",
        text="Your Acme login code is 482 913\n\nIt is valid for 15 minutes.",
        codes=("482913",),
    ),
    Message(
        id="alphanumeric-passcode",
        subject="Your one-time passcode",
        text=(
            "Use passcode K7Q2XZ to finish signing in to Acme Bank. It expires at 10:45 AM "
            "(UTC+2) on 05/06/2024."
        ),
        codes=("K7Q2XZ",),
    ),
    Message(
        id="alphanumeric-code-with-dash",
        subject="Security code",
        text="Your security code is K7Q-29X. Enter it on the sign-in page.",
        codes=("K7Q-29X",),
    ),
    Message(
        id="eight-digits-in-two-groups",
        subject="Microsoft account security code",
        text=(
            "Please use the following security code for the Microsoft account ja***@example.com."
            "\n\nSecurity code: 4821 5637\n\nIf you don't recognize the Microsoft account "
            "ja***@example.com, you can click https://account.live.com/dp?ft=Ac8 to remove "
            "your email address from that account.\n\nThanks,\nThe Microsoft account team"
        ),
        codes=("48215637",),
        link="https://account.live.com/dp?ft=Ac8",
        kinds=("other",),
    ),
    Message(
        id="pin-in-capitals-only",
        subject="Your new card is on its way",
        text=(
            "Pin this message so you can find it later.\n"
            "Your PIN is 4821. Never share it with anyone, including our staff.\n"
            "Card ending in 9921 arrives in 3-5 business days."
        ),
        codes=("4821",),
    ),
    Message(
        id="bank-otp-sms-style",
        subject="Transaction OTP",
        text=(
            "OTP for your transaction of INR 2,500.00 at ACME STORE is 739104. Valid for "
            "5 mins. Do not share it with anyone. Call 1800-425-3800 if not initiated by you."
        ),
        codes=("739104",),
    ),
    Message(
        id="year-directly-after-keyword-is-a-code",
        subject="Door access",
        text="Your building door PIN: 2019\nValid from May 5, 2024 until June 30, 2024.",
        codes=("2019",),
    ),
    Message(
        id="old-code-year-then-new-code",
        subject="Your code has changed",
        text="Your access code from 2023 has expired. Your new access code is 5821.",
        codes=("5821",),
    ),
    Message(
        id="subject-and-body-codes-in-reading-order",
        subject="739104 is your Acme code",
        text=(
            "Your Acme code is 739104.\n\n"
            "Lost your phone? Keep this backup code somewhere safe: 5821-4930"
        ),
        codes=("739104", "5821-4930"),
    ),
    Message(
        id="two-factor-code",
        subject="2FA",
        text="Your 2FA code: 8261. It expires in 30 seconds.",
        codes=("8261",),
    ),
    Message(
        id="code-on-own-line-announced-only-by-subject",
        subject="Your Acme verification code",
        html=_page(
            "<tr><td><div>Hi Jane,</div>"
            "<div style='font-size:28px;font-weight:bold'>739155</div>"
            "<div>It expires in 10 minutes. Didn't ask for it? Ignore this email.</div>"
            "</td></tr>"
        ),
        codes=("739155",),
    ),
    Message(
        id="text-and-html-same-code-deduplicated",
        subject="Verify your email",
        text=(
            "Your verification code is 204816.\n\n"
            "Or open https://acme.com/verify?code=204816&u=88 to verify your email."
        ),
        html=_page(
            "<tr><td>Your verification code is</td></tr>"
            "<tr><td class='code'>204816</td></tr>"
            "<tr><td><a href='https://acme.com/verify?code=204816&amp;u=88'>Verify email</a>"
            "</td></tr>"
        ),
        codes=("204816",),
        link="https://acme.com/verify?code=204816&u=88",
        links=(("https://acme.com/verify?code=204816&u=88", "Verify email", "verify"),),
    ),
    Message(
        id="digits-in-urls-and-addresses-ignored",
        subject="Finish signing in",
        text=(
            "Click https://acme.com/auth?code=839201&user=48213 or enter code 583920.\n"
            "Questions? Write to code-help@acme.com or visit www.acme.com/code/771203."
        ),
        codes=("583920",),
        link="https://acme.com/auth?code=839201&user=48213",
        kinds=("other",),
    ),
    Message(
        id="script-style-comments-are-not-text",
        subject="Your verification code",
        html=(
            "<html><head><title>Code 111111</title><style>/* code 222222 */ .code{}</style>"
            "<script>var code = '333333';</script></head><body>"
            "<!-- verification code 444444 -->"
            "<p>Your verification code is <b>555 666</b>.</p></body></html>"
        ),
        codes=("555666",),
    ),
    # ---------------------------------------------------------------- things that are not codes
    Message(
        id="newsletter-years-prices-promo",
        subject="Spring Sale: 20% off everything",
        html=_page(
            "<tr><td><h1>The 2024 Spring Collection is here</h1></td></tr>"
            "<tr><td><p>Our best-selling jacket is now $1299 (was $1599). Save 20% with code "
            "SPRING2024 at checkout — valid until May 31, 2024.</p>"
            "<p>Free shipping on orders over 5000 JPY. Use promo code WELCOME10 on your first "
            "order.</p>"
            "<p><a href='https://shop.acme.com/spring?utm_source=newsletter'>Shop now</a></p>"
            "</td></tr>"
            "<tr><td>&copy; 2024 Acme Inc. All rights reserved. Read our "
            "<a href='https://acme.com/code-of-conduct'>Code of Conduct</a>. "
            "<a href='https://acme.com/unsubscribe?u=9f3a'>Unsubscribe</a></td></tr>"
        ),
        list_unsubscribe="<mailto:unsubscribe@acme.com?subject=unsubscribe>, "
        "<https://acme.com/unsubscribe?u=9f3a>",
        codes=(),
        link="https://shop.acme.com/spring?utm_source=newsletter",
        links=(
            ("https://shop.acme.com/spring?utm_source=newsletter", "Shop now", "other"),
            ("https://acme.com/code-of-conduct", "Code of Conduct", "other"),
            ("https://acme.com/unsubscribe?u=9f3a", "Unsubscribe", "unsubscribe"),
        ),
    ),
    Message(
        id="order-shipping-tracking-phone",
        subject="Your order #48213 has shipped",
        text=(
            "Good news! Your order is on its way.\n\n"
            "Order code: 48213907\n"
            "Tracking code: 4829 1375\n"
            "Estimated delivery: Tuesday, 14 May 2024\n"
            "Track your package: https://track.acme.com/t/1Z999AA10123456784\n\n"
            "Use code THANKS15 for 15% off your next order.\n"
            "Questions? Call 1-800-555-0199 (Mon-Fri 9:00-17:00)."
        ),
        codes=(),
        link="https://track.acme.com/t/1Z999AA10123456784",
        kinds=("other",),
    ),
    Message(
        id="invoice-and-payment-reference",
        subject="Invoice INV-2024-0042 from Acme",
        text=(
            "Invoice number: 20240117\n"
            "Payment reference code: 55512345\n"
            "Amount due: EUR 1,234.50 by 31.01.2024\n"
            "Please verify the invoice details. Invoice INV-88231 replaces INV-88230."
        ),
        codes=(),
    ),
    Message(
        id="tracking-and-account-numbers-near-verify",
        subject="Please verify your delivery address",
        text=(
            "Please verify your address. Tracking number: 48291375\n"
            "To verify account 48213907 enter code 583920 on the delivery page."
        ),
        codes=("583920",),
    ),
    Message(
        id="phone-numbers-near-keyword",
        subject="Verify your identity",
        text=(
            "To verify your identity, call us at +1 (555) 123-4567 or 0800 123 456. "
            "Your verification code is 739104."
        ),
        codes=("739104",),
    ),
    Message(
        id="postal-codes-near-keyword",
        subject="Address verification",
        text=(
            "Verification of your address failed for CA 94043.\n"
            "Verification also failed for W1D 3QF, London and K1A 0B1, Ottawa.\n"
            "Verification pending: D-10115 Berlin.\n"
            "Verification address: 1600 Amphitheatre Parkway."
        ),
        codes=(),
    ),
    Message(
        id="dates-times-ip-addresses",
        subject="New sign-in",
        text=(
            "Your verification code was requested on 2024-05-01 at 10:45 from 192.168.1.24. "
            "Code: 583920"
        ),
        codes=("583920",),
    ),
    Message(
        id="version-and-build-numbers",
        subject="Acme Desktop 3.2.1 released",
        text=(
            "Version 3.2.1 (build 48213) fixes the sign-in code bug.\n"
            "Release notes: https://acme.com/releases/3.2.1"
        ),
        codes=(),
        link="https://acme.com/releases/3.2.1",
        kinds=("other",),
    ),
    Message(
        id="error-codes",
        subject="Sign-in problem",
        text=(
            "Sign-in failed with error code 0x80070005 (code 5003).\n"
            "Error code: 48213. Fehlercode 4821.\n"
            "Please contact support."
        ),
        codes=(),
    ),
    Message(
        id="copyright-footer-after-keyword",
        subject="Enter the code in the app",
        text="Enter the code in the app.\n© 2024 Acme Inc. All rights reserved.",
        codes=(),
    ),
    Message(
        id="booking-and-flight-numbers",
        subject="Your booking is confirmed",
        text=(
            "Your booking code is K7Q2XZ. Check-in opens 24 hours before departure.\n"
            "Flight LH 4821 from FRA to JFK, seat 32A. Reservation code: XK9P2M."
        ),
        codes=(),
    ),
    Message(
        id="card-ending-in",
        subject="Confirm your payment",
        text=("Verify the payment with the card ending in 4242. Your verification code is 739104."),
        codes=("739104",),
    ),
    Message(
        id="qr-source-zip-codes",
        subject="Developer newsletter: code review tips",
        text=(
            "Scan the QR code 4829 1375 at the venue. The source code 2024 release is out. "
            "Enter your zip code 94105 for local events. Code review 4821 is merged."
        ),
        codes=(),
    ),
    # ---------------------------------------------------------------- other languages
    Message(
        id="german-bestaetigungscode",
        subject="Ihr Bestätigungscode für Acme",
        text=(
            "Hallo Max,\n\n"
            "Ihr Bestätigungscode lautet: 739201\n\n"
            "Der Code ist 15 Minuten gültig. Ihre Bestellnummer 4455667 bleibt unverändert.\n\n"
            "Acme GmbH · Hauptstraße 5 · D-10115 Berlin · Tel. +49 30 1234567"
        ),
        codes=("739201",),
    ),
    Message(
        id="german-links",
        subject="Passwort zurücksetzen",
        html=_page(
            "<tr><td><a href='https://acme.de/konto/anmelden'>Anmelden</a></td></tr>"
            "<tr><td><a href='https://acme.de/p/neu?t=7f'>Passwort zurücksetzen</a></td></tr>"
            "<tr><td><a href='https://acme.de/e?t=1'>E-Mail-Adresse bestätigen</a></td></tr>"
            "<tr><td><a href='https://acme.de/nl?id=3'>Newsletter abbestellen</a></td></tr>"
        ),
        codes=(),
        link="https://acme.de/p/neu?t=7f",
        kinds=("login", "reset", "verify", "unsubscribe"),
    ),
    Message(
        id="french-code-and-promo",
        subject="Votre code de vérification",
        text=(
            "Bonjour,\n\nVotre code de vérification est : 583 920.\n"
            "Ce code expire dans 10 minutes.\n\n"
            "Code promo : ETE24 — 15 % de réduction sur votre prochaine commande."
        ),
        codes=("583920",),
    ),
    Message(
        id="spanish-codigo",
        subject="Código de verificación",
        text=(
            "Tu código de verificación es 482913.\n"
            "Tu pedido 12345678 llegará el 5 de mayo de 2024.\n"
            "Código promocional VERANO24 y código postal 28013 no son códigos de acceso."
        ),
        codes=("482913",),
    ),
    Message(
        id="portuguese-codigo",
        subject="Seu código de verificação",
        html=_page(
            "<tr><td><p>Olá, Ana!</p><p>Seu código de verificação é <b>739104</b>.</p>"
            "<p>Não compartilhe este código. Pedido nº 48213907.</p>"
            "<p><a href='https://loja.acme.com.br/entrar'>Entrar</a> · "
            "<a href='https://loja.acme.com.br/descadastrar?e=1'>Descadastrar</a></p>"
            "</td></tr>"
        ),
        codes=("739104",),
        link="https://loja.acme.com.br/entrar",
        kinds=("login", "unsubscribe"),
    ),
    Message(
        id="japanese-full-width-code",
        subject="【Acme】認証コードのお知らせ",
        text=(
            "Acme をご利用いただきありがとうございます。\n"
            "認証コード：８３９２０１\n"
            "このコードの有効期限は10分です。\n"
            "ご注文番号：20240501123"
        ),
        html=_page(
            "<tr><td>認証コード：<b>８３９２０１</b></td></tr>"
            "<tr><td><a href='https://acme.jp/login'>ログイン</a> "
            "<a href='https://acme.jp/mail/stop'>配信停止</a></td></tr>"
        ),
        codes=("839201",),
        link="https://acme.jp/login",
        kinds=("login", "unsubscribe"),
    ),
    Message(
        id="chinese-simplified-no-spaces",
        subject="验证码通知",
        text="【Acme】您的验证码是123456，5分钟内有效。请勿泄露给他人。订单号：202405018",
        codes=("123456",),
    ),
    Message(
        id="chinese-traditional",
        subject="Acme 驗證碼",
        text="您的驗證碼為 654321，請於10分鐘內輸入。",
        codes=("654321",),
    ),
    Message(
        id="korean-inje-beonho",
        subject="[Acme] 인증번호 안내",
        text="[Web발신]\n[Acme] 인증번호 [583920]를 입력해주세요. 주문번호 48213907",
        codes=("583920",),
    ),
    Message(
        id="korean-verification-link",
        subject="이메일 인증",
        html=_page(
            "<tr><td><a href='https://acme.kr/auth/email?t=9'>이메일 인증하기</a></td></tr>"
            "<tr><td><a href='https://acme.kr/login'>로그인</a></td></tr>"
            "<tr><td><a href='https://acme.kr/unsub'>수신거부</a></td></tr>"
        ),
        codes=(),
        link="https://acme.kr/auth/email?t=9",
        kinds=("verify", "login", "unsubscribe"),
    ),
    Message(
        id="russian-kod-podtverzhdeniya",
        subject="Код подтверждения",
        text=(
            "Ваш код подтверждения: 582013. Никому не сообщайте этот код. "
            "Заказ № 48213907 от 5 мая 2024 г."
        ),
        codes=("582013",),
    ),
    # ---------------------------------------------------------------- links
    Message(
        id="magic-link",
        subject="Your magic link for Acme",
        html=_page(
            "<tr><td><p>Click the button below to sign in. This link expires in 15 minutes."
            "</p></td></tr>"
            "<tr><td><a href='https://app.acme.io/auth/magic?token=Zx81&amp;email=jane%40"
            "example.com' style='background:#000;color:#fff'>Sign in to Acme</a></td></tr>"
            "<tr><td>Or copy this URL: https://app.acme.io/auth/magic?token=Zx81&amp;email=jane"
            "%40example.com</td></tr>"
        ),
        codes=(),
        link="https://app.acme.io/auth/magic?token=Zx81&email=jane%40example.com",
        links=(
            (
                "https://app.acme.io/auth/magic?token=Zx81&email=jane%40example.com",
                "Sign in to Acme",
                "login",
            ),
        ),
    ),
    Message(
        id="reset-subject-beats-login-link",
        subject="Reset your password",
        html=_page(
            "<tr><td><a href='https://acme.com/login'>Log in</a></td></tr>"
            "<tr><td><p>We received a request to reset the password for your account.</p>"
            "<a href='https://acme.com/password/reset?token=Qk2'>Reset password</a></td></tr>"
            "<tr><td><img src='https://t.acme.com/open.gif?id=77' width='1' height='1' alt=''>"
            "</td></tr>"
        ),
        codes=(),
        link="https://acme.com/password/reset?token=Qk2",
        links=(
            ("https://acme.com/login", "Log in", "login"),
            ("https://acme.com/password/reset?token=Qk2", "Reset password", "reset"),
        ),
    ),
    Message(
        id="login-subject-beats-reset-link",
        subject="Sign in to your Acme account",
        html=_page(
            "<tr><td><a href='https://acme.com/forgot'>Forgot your password?</a></td></tr>"
            "<tr><td><a href='https://acme.com/signin?e=jane'>Sign in</a></td></tr>"
        ),
        codes=(),
        link="https://acme.com/signin?e=jane",
        kinds=("reset", "login"),
    ),
    Message(
        id="default-order-prefers-verify",
        subject="Welcome to Acme!",
        html=_page(
            "<tr><td><a href='https://acme.com/'><img src='https://cdn.acme.com/logo.png' "
            "alt='Acme'></a></td></tr>"
            "<tr><td><a href='https://acme.com/login'>Log in</a></td></tr>"
            "<tr><td><a href='https://acme.com/activate?k=55'>Activate your account</a></td></tr>"
        ),
        codes=(),
        link="https://acme.com/activate?k=55",
        links=(
            ("https://acme.com/", "Acme", "other"),
            ("https://acme.com/login", "Log in", "login"),
            ("https://acme.com/activate?k=55", "Activate your account", "verify"),
        ),
    ),
    Message(
        id="security-alert-subject-names-login",
        subject="New sign-in to your account",
        html=_page(
            "<tr><td><a href='https://acme.com/security/activity'>Review activity</a></td></tr>"
            "<tr><td><a href='https://acme.com/account/recover'>Secure your account</a></td></tr>"
            "<tr><td><a href='https://acme.com/login'>Sign in</a></td></tr>"
        ),
        codes=(),
        link="https://acme.com/login",
        kinds=("other", "reset", "login"),
    ),
    Message(
        id="anchor-text-precedence-over-url",
        subject="Account help",
        html=_page(
            "<tr><td><a href='https://acme.com/login?next=/settings'>Sign in to reset your "
            "password</a></td></tr>"
            "<tr><td><a href='https://acme.com/unsubscribe'>Log in to manage preferences</a>"
            "</td></tr>"
        ),
        codes=(),
        link="https://acme.com/login?next=/settings",
        kinds=("reset", "unsubscribe"),
    ),
    Message(
        id="url-words-decide-when-anchor-text-is-generic",
        subject="Action needed",
        html=_page(
            "<tr><td><a href='https://acme.com/verifyx/1'>Click here</a></td></tr>"
            "<tr><td><a href='https://acme.com/verify-email?token=ab12'>Click here</a></td></tr>"
            "<tr><td><a href='https://acme.com/user/confirmEmail?id=4'>here</a></td></tr>"
            "<tr><td><a href='https://click.mail.acme.com/ls/click?upn=https%3A%2F%2Facme.com"
            "%2Fpassword%2Freset%3Ft%3D9'>this link</a></td></tr>"
        ),
        codes=(),
        link="https://acme.com/verify-email?token=ab12",
        links=(
            ("https://acme.com/verifyx/1", "Click here", "other"),
            ("https://acme.com/verify-email?token=ab12", "Click here", "verify"),
            ("https://acme.com/user/confirmEmail?id=4", "here", "verify"),
            (
                "https://click.mail.acme.com/ls/click?upn=https%3A%2F%2Facme.com%2Fpassword"
                "%2Freset%3Ft%3D9",
                "this link",
                "reset",
            ),
        ),
    ),
    Message(
        id="list-unsubscribe-added-at-end",
        subject="This week at Acme",
        html=_page(
            "<tr><td><a href='https://blog.acme.com/posts/42'>Read the full story</a></td></tr>"
            "<tr><td><a href='https://acme.com/prefs?u=1'>Manage preferences</a></td></tr>"
        ),
        list_unsubscribe="<mailto:leave-42@lists.acme.com>, <https://lists.acme.com/u/42?sig=8a>",
        codes=(),
        link="https://blog.acme.com/posts/42",
        links=(
            ("https://blog.acme.com/posts/42", "Read the full story", "other"),
            ("https://acme.com/prefs?u=1", "Manage preferences", "unsubscribe"),
            ("https://lists.acme.com/u/42?sig=8a", "", "unsubscribe"),
        ),
    ),
    Message(
        id="list-unsubscribe-url-already-in-body",
        subject="Weekly digest",
        html=_page(
            "<tr><td><a href='https://lists.acme.com/u/42?sig=8a'>Click here</a> if you no "
            "longer want these e-mails.</td></tr>"
        ),
        list_unsubscribe="<https://lists.acme.com/u/42?sig=8a>,<mailto:leave@acme.com>",
        codes=(),
        link=None,
        links=(("https://lists.acme.com/u/42?sig=8a", "Click here", "unsubscribe"),),
    ),
    Message(
        id="only-unsubscribe-links-means-no-primary-link",
        subject="You're subscribed",
        text="Thanks for subscribing! Opt out any time: https://acme.com/opt-out?u=5",
        list_unsubscribe="<https://acme.com/opt-out?u=5>",
        codes=(),
        link=None,
        links=(("https://acme.com/opt-out?u=5", "", "unsubscribe"),),
    ),
    Message(
        id="tracking-pixels-mailto-tel-duplicates",
        subject="Your receipt",
        html=_page(
            "<tr><td><a href='https://acme.com/?utm=logo'><img src='https://cdn.acme.com/l.png'"
            " alt='Acme Store'></a></td></tr>"
            "<tr><td><a href='mailto:support@acme.com'>Email support</a> or "
            "<a href='tel:+15551234567'>call us</a>.</td></tr>"
            "<tr><td><a href='https://acme.com/?utm=logo'>Visit Acme</a> · "
            "<a href='https://acme.com/receipts/77'>View receipt</a> · "
            "<a href='javascript:void(0)'>Print</a> · <a href='#top'>Top</a></td></tr>"
            "<tr><td><img src='https://t.acme.com/o.gif?r=77' width='1' height='1'></td></tr>"
        ),
        text=(
            "View receipt: https://acme.com/receipts/77\n"
            "Visit us at https://acme.com/?utm=logo.\n"
            "Help centre (https://help.acme.com/receipts) or <https://acme.com/contact>."
        ),
        codes=(),
        link="https://acme.com/?utm=logo",
        links=(
            ("https://acme.com/?utm=logo", "Acme Store", "other"),
            ("https://acme.com/receipts/77", "View receipt", "other"),
            ("https://help.acme.com/receipts", "", "other"),
            ("https://acme.com/contact", "", "other"),
        ),
    ),
    Message(
        id="entities-in-href-kept-as-written",
        subject="Verify your email address",
        html=(
            '<p><A HREF="  https://acme.com/v?a=1&amp;b=2&copy=3&#38;c=4  ">Verify &amp; '
            "continue</A></p>"
        ),
        codes=(),
        link="https://acme.com/v?a=1&b=2&copy=3&c=4",
        links=(("https://acme.com/v?a=1&b=2&copy=3&c=4", "Verify & continue", "verify"),),
    ),
    Message(
        id="text-body-only-links",
        subject="Confirm your subscription",
        text=(
            "Please confirm your subscription:\n"
            "https://lists.acme.com/confirm?id=77.\n\n"
            "(Not you? Ignore this e-mail or see https://acme.com/help/why-am-i-getting-this)"
        ),
        codes=(),
        link="https://lists.acme.com/confirm?id=77",
        links=(
            ("https://lists.acme.com/confirm?id=77", "", "verify"),
            ("https://acme.com/help/why-am-i-getting-this", "", "other"),
        ),
    ),
    Message(
        id="html-fallback-when-text-is-blank",
        subject="Your sign-in code",
        text="   \n  ",
        html="<div>Your sign-in code: <span style='font-weight:bold'>G7R-4Q2</span></div>",
        codes=("G7R-4Q2",),
    ),
]


# ---------------------------------------------------------------- codes among distractors
# Issue 28, point 5: transactional mail crowded with other numbers (order and reference numbers,
# prices with thousands separators and decimal commas, dates, delivery windows, phone numbers,
# product models, IBANs), in nine languages; login links whose anchor says only "Continue"; and
# order mail full of numbers that carries no code at all.
DISTRACTORS: list[Message] = [
    Message(
        id="distractors-en-delivery-passcode-order-prices-window",
        subject="Your delivery passcode for order 112-4839201-7731902",
        text=(
            "Hi Jane,\n\n"
            "Your package arrives today, Friday 11/27, between 14:00–16:00.\n\n"
            "Order 112-4839201-7731902\n"
            "Apple MacBook Air 13-inch 256GB      $1,099.00\n"
            "AppleCare+ for MacBook Air           $200.00\n"
            "Order total:                         $1,299.00\n\n"
            "Because this order is over $1,000, the driver will ask for a one-time passcode. "
            "Share this passcode only with the driver at your door: 4729\n\n"
            "Tracking ID: TBA304918273645\n"
            "Questions? Call 1-888-280-4331 (24/7)."
        ),
        codes=("4729",),
    ),
    Message(
        id="distractors-en-3ds-otp-merchant-amount-date",
        subject="Your one-time passcode",
        text=(
            "Your one-time passcode for the purchase of EUR 1.234,56 at MEDIAMARKT 0417 BERLIN "
            "on 27.11.2026 14:32 is 739104. Never share it. Not you? Call +49 69 1234 5678."
        ),
        codes=("739104",),
    ),
    Message(
        id="distractors-en-code-for-order-number-is",
        subject="Confirm your pickup",
        text=(
            "Your verification code for order 4455667 (2 items, $1,299.00, ready since "
            "2026-11-27) is 608213. Show it at the counter of store 0412, 1200 Market St, "
            "open 09:00–21:00."
        ),
        codes=("608213",),
    ),
    Message(
        id="distractors-en-html-receipt-code-at-the-end",
        subject="Confirm your Acme Pro renewal",
        html=_page(
            "<tr><td><h2>Your renewal is almost done</h2></td></tr>"
            "<tr><td><table>"
            "<tr><td>Plan</td><td>Acme Pro (annual)</td></tr>"
            "<tr><td>Price</td><td>$1,299.00/yr</td></tr>"
            "<tr><td>Tax (8.25%)</td><td>$107.17</td></tr>"
            "<tr><td>Total</td><td>$1,406.17</td></tr>"
            "<tr><td>Renews on</td><td>2026-11-27</td></tr>"
            "<tr><td>Invoice</td><td>20261127</td></tr>"
            "<tr><td>Seats</td><td>1200</td></tr>"
            "</table></td></tr>"
            "<tr><td>Enter this verification code in the app to confirm the charge:</td></tr>"
            "<tr><td class='code'>918427</td></tr>"
            "<tr><td>This code expires in 15 minutes. Support: +1 (415) 555-0132, "
            "Mon–Fri 9:00–17:00 PT.</td></tr>"
        ),
        codes=("918427",),
    ),
    Message(
        id="distractors-en-bank-login-code-balance-reference",
        subject="Your Acme Bank sign-in code",
        text=(
            "Your sign-in code is 739 104. It expires in 5 minutes.\n\n"
            "This code was requested on 11/27 at 14:05 from a new device. "
            "Reference 48213907, session 20261127.\n"
            "Available balance: $12,345.67 (as of 11/27/2026)."
        ),
        codes=("739104",),
    ),
    Message(
        id="distractors-en-second-keyword-then-ticket-number",
        subject="Verify your email to finish your order",
        text=(
            "Thanks for ordering from Acme Outdoor!\n\n"
            "Verification code: 284615\n\n"
            "Enter the code on the checkout page to place order 4455667. Total: $1,299.00 "
            "(3 items). Delivery window: Tue 12/01, 08:00–12:00.\n"
            "Need help? Call 1-800-555-0199 and quote ticket 58213790."
        ),
        codes=("284615",),
    ),
    Message(
        id="distractors-de-bestaetigungscode-bestellung-preise",
        subject="Ihre Bestellung 302-4455667: Bestätigungscode",
        text=(
            "Guten Tag Frau Müller,\n\n"
            "vielen Dank für Ihre Bestellung vom 27.11.2026.\n\n"
            "Bestellnr.: 302-4455667\n"
            "Summe: 1.234,56 € (inkl. 19 % MwSt.: 197,11 €)\n"
            "Lieferung: Sa., 28.11.2026, 14:00–16:00 Uhr\n\n"
            "Bitte bestätigen Sie die Bestellung mit diesem Bestätigungscode: 582 913\n\n"
            "Der Code ist 15 Minuten gültig. Vorgangsnummer 20261127.\n"
            "Bei Fragen erreichen Sie uns unter 030 12345678 (Mo–Fr 8–20 Uhr)."
        ),
        codes=("582913",),
    ),
    Message(
        id="distractors-de-tan-ueberweisung-iban-betrag",
        subject="Ihre TAN",
        text=(
            "Ihre TAN für die Überweisung von 1.250,00 € an Max Mustermann "
            "(IBAN DE89 3704 0044 0532 0130 00) am 27.11.2026 lautet: 583920\n"
            "Geben Sie diese TAN niemals telefonisch weiter."
        ),
        codes=("583920",),
    ),
    Message(
        id="distractors-de-html-sicherheitscode-artikeltabelle",
        subject="Zahlung freigeben",
        html=_page(
            "<tr><td><p>Hallo Jonas,</p><p>bitte geben Sie Ihre Zahlung frei.</p></td></tr>"
            "<tr><td><table>"
            "<tr><th>Artikel</th><th>Menge</th><th>Preis</th></tr>"
            "<tr><td>Sony WH-1000XM5</td><td>1</td><td>349,00 €</td></tr>"
            "<tr><td>Versand</td><td></td><td>4,99 €</td></tr>"
            "<tr><td>Gesamtsumme</td><td></td><td>353,99 €</td></tr>"
            "</table></td></tr>"
            "<tr><td>Artikelnummer 4455667 · Rechnungsnummer RE-2026-11873</td></tr>"
            "<tr><td>Ihr Sicherheitscode für die Zahlung von 353,99 € an Sony WH-1000XM5 "
            "lautet:</td></tr>"
            "<tr><td class='code'>730 418</td></tr>"
            "<tr><td>Hotline: 0800 1234567 · Lieferfenster 14:00–16:00</td></tr>"
        ),
        codes=("730418",),
    ),
    Message(
        id="distractors-de-code-gueltig-dann-paketnummer",
        subject="Ihr Einmalcode",
        text=(
            "Ihr Einmalcode: 4821\n"
            "Der Code gilt bis 27.11.2026, 16:00 Uhr. Paket 1 von 2, Gewicht 2,5 kg, "
            "Sendung 00340434161234567890.\n"
            "Zustellung zwischen 14:00 und 16:00 Uhr an Musterstraße 12, 10115 Berlin."
        ),
        codes=("4821",),
    ),
    Message(
        id="distractors-fr-code-commande-montant-reference",
        subject="Validez votre paiement",
        text=(
            "Bonjour Camille,\n\n"
            "Merci pour votre commande n° 4455667 du 27/11/2026.\n"
            "Montant total : 1 234,56 € TTC\n"
            "Livraison prévue le vendredi 28 novembre entre 14h00 et 16h00.\n\n"
            "Pour valider le paiement, saisissez le code de vérification suivant : 804 317\n\n"
            "Ce code expire dans 10 minutes. Référence : 88421907\n"
            "Service client : 01 23 45 67 89"
        ),
        codes=("804317",),
    ),
    Message(
        id="distractors-fr-commande-n-degre-code-de-retrait",
        subject="Votre code de confirmation",
        text=(
            "Commande n° 4455667 — 3 articles — 1 299,00 €\n"
            "Votre code de confirmation pour la commande n° 4455667 est le 5139 0826.\n"
            "Retrait le 28/11/2026 de 14:00 à 16:00, au 12 rue de Rivoli, 75004 Paris."
        ),
        codes=("51390826",),
    ),
    Message(
        id="distractors-es-codigo-pedido-referencia",
        subject="Tu código de verificación",
        text=(
            "Hola Lucía:\n\n"
            "Gracias por tu compra. Pedido n.º 4455667 (27/11/2026)\n"
            "Total: 1.299,00 €\n"
            "Entrega: sábado 28/11, de 14:00 a 16:00\n\n"
            "Tu código de verificación es 362 915. Caduca en 10 minutos.\n"
            "No compartas este código. Referencia del envío: 88421907\n"
            "Atención al cliente: 912 345 678"
        ),
        codes=("362915",),
    ),
    Message(
        id="distractors-es-otp-compra-importe-comercio",
        subject="Código para confirmar tu compra",
        text=(
            "BANCO ACME: El código para confirmar tu compra de 1.234,56 EUR en ZARA 0123 "
            "MADRID el 27/11/2026 a las 14:32 es 482017. No lo compartas con nadie."
        ),
        codes=("482017",),
    ),
    Message(
        id="distractors-pt-codigo-pedido-protocolo",
        subject="Confirme o recebimento do seu pedido",
        text=(
            "Olá, João!\n\n"
            "Seu pedido nº 1234567 foi confirmado em 27/11/2026.\n"
            "Valor total: R$ 1.299,90 (em 10x de R$ 129,99)\n"
            "Previsão de entrega: 02/12/2026, das 14:00 às 18:00\n\n"
            "Para confirmar o recebimento, informe ao entregador o código: 5821\n\n"
            "Não compartilhe este código com ninguém. Protocolo de atendimento: 20261127\n"
            "Central: (11) 4004-1234"
        ),
        codes=("5821",),
    ),
    Message(
        id="distractors-pt-html-codigo-de-verificacao-nota",
        subject="Seu código de verificação",
        html=_page(
            "<tr><td><p>Olá, Ana!</p></td></tr>"
            "<tr><td><table>"
            "<tr><td>Pedido</td><td>#7730419</td></tr>"
            "<tr><td>Nota fiscal</td><td>000.482.913</td></tr>"
            "<tr><td>Total</td><td>R$ 2.349,00</td></tr>"
            "<tr><td>Entrega</td><td>28/11/2026, 14h–16h</td></tr>"
            "</table></td></tr>"
            "<tr><td>Seu código de verificação é</td></tr>"
            "<tr><td class='code'>K7Q2XZ</td></tr>"
            "<tr><td>O código vale por 10 minutos. SAC: 0800 123 4567, CNPJ 12.345.678/0001-90"
            "</td></tr>"
        ),
        codes=("K7Q2XZ",),
    ),
    Message(
        id="distractors-it-codice-ordine-spedizione",
        subject="Conferma la consegna",
        text=(
            "Ciao Marco,\n\n"
            "grazie per il tuo ordine n. 4455667 del 27.11.2026.\n"
            "Totale: 1.234,56 € (IVA inclusa)\n"
            "Consegna prevista: venerdì 28/11 tra le 14:00 e le 16:00\n\n"
            "Il codice di verifica per confermare la consegna è 618 204.\n"
            "Non condividere questo codice. Numero di spedizione: 88421907\n"
            "Servizio clienti: 02 1234 5678"
        ),
        codes=("618204",),
    ),
    Message(
        id="distractors-it-codice-cliente-e-otp",
        subject="Il tuo codice OTP",
        text=(
            "Gentile cliente, codice cliente 4455667.\n"
            "Il codice OTP per autorizzare il pagamento di € 1.299,00 del 27/11/2026 è: 935172\n"
            "Per assistenza chiama il numero verde 800 123 456."
        ),
        codes=("935172",),
    ),
    Message(
        id="distractors-nl-verificatiecode-bestelling-ordernummer",
        subject="Je verificatiecode",
        text=(
            "Hoi Sanne,\n\n"
            "Bedankt voor je bestelling van 27-11-2026.\n"
            "Totaal: € 1.234,56\n"
            "Bezorging: zaterdag 28 november tussen 14:00 en 16:00 uur\n\n"
            "Je verificatiecode is 274 610\n\n"
            "Deel deze code met niemand. Ordernummer: 88421907\n"
            "Klantenservice: 020 123 4567"
        ),
        codes=("274610",),
    ),
    Message(
        id="distractors-nl-bevestigingscode-bedrag-zonder-scheiding",
        subject="Bevestig je betaling",
        text=(
            "Je bevestigingscode voor de betaling van € 1299,- aan Acme B.V. "
            "(factuur 20261127) is 4729 8316. Deze code is 5 minuten geldig."
        ),
        codes=("47298316",),
    ),
    Message(
        id="distractors-ja-ninsho-code-chumon-kingaku",
        subject="【Acme】ご注文の受け取り認証コード",
        text=(
            "山田 太郎 様\n\n"
            "この度はご注文いただきありがとうございます。\n"
            "ご注文番号：250-1234567-8901234\n"
            "ご注文日：2026年11月27日\n"
            "お支払い金額：￥12,800（税込）\n"
            "お届け予定：2026/11/28 14:00〜16:00\n\n"
            "お受け取りの際は、下記の認証コードを配達員にお伝えください。\n"
            "認証コード：４７２９１８\n\n"
            "お問い合わせ：0120-123-456（受付時間 9:00〜18:00）"
        ),
        codes=("472918",),
    ),
    Message(
        id="distractors-ja-onetime-password-points-yen",
        subject="ワンタイムパスワードのお知らせ",
        text=(
            "ワンタイムパスワード：739104\n"
            "有効期限：2026/11/27 14:45\n"
            "ご利用金額：12800円（ポイント利用 1200ポイント）\n"
            "このコードは他人に教えないでください。会員番号 48213907"
        ),
        codes=("739104",),
    ),
    Message(
        id="distractors-en-range-and-currency-symbol-with-space",
        subject="Your code to approve the transfer",
        text=(
            "Approve your transfer of US$ 1500 to Jane Doe (reference 4821-7730). "
            "Transfers of 1000–5000 USD need a code. Your code is 670 213."
        ),
        codes=("670213",),
    ),
    Message(
        id="distractors-en-code-first-then-order-lines",
        subject="Verify your order",
        text=(
            "Code: 5294\n"
            "Valid until 11/27 16:00. Order 4455667 · 2 × $649.50 = $1,299.00 · "
            "delivery 14:00–16:00"
        ),
        codes=("5294",),
    ),
    # --------------------------------------------------------- "Continue" links, URL decides
    Message(
        id="distractors-link-continue-sessions-magic",
        subject="Your sign-in link",
        html=_page(
            "<tr><td><p>Hi Jane, click the button below to finish signing in. The link "
            "expires in 15 minutes.</p></td></tr>"
            "<tr><td><a href='https://app.acme.io/sessions/magic?token=Zx81Qp'>Continue</a>"
            "</td></tr>"
            "<tr><td><a href='https://acme.io/help'>Help</a> · "
            "<a href='https://acme.io/privacy'>Privacy</a></td></tr>"
        ),
        codes=(),
        link="https://app.acme.io/sessions/magic?token=Zx81Qp",
        links=(
            ("https://app.acme.io/sessions/magic?token=Zx81Qp", "Continue", "login"),
            ("https://acme.io/help", "Help", "other"),
            ("https://acme.io/privacy", "Privacy", "other"),
        ),
    ),
    Message(
        id="distractors-link-weiter-sessions-magic-de",
        subject="Dein Link für Acme",
        html=_page(
            "<tr><td><p>Hallo Lea, klicke auf die Schaltfläche, um fortzufahren. Der Link ist "
            "bis 27.11.2026, 14:15 Uhr gültig.</p></td></tr>"
            "<tr><td><a href='https://acme.io/hilfe'>Hilfe</a></td></tr>"
            "<tr><td><a href='https://app.acme.io/de/sessions/magic?t=9f8e7d'>Weiter</a></td>"
            "</tr>"
        ),
        codes=(),
        link="https://app.acme.io/de/sessions/magic?t=9f8e7d",
        kinds=("other", "login"),
    ),
    Message(
        id="distractors-link-continuer-tracked-sessions-magic-fr",
        subject="Accédez à votre compte",
        html=_page(
            "<tr><td><a href='https://click.acme.io/ls/click?upn=https%3A%2F%2Fapp.acme.io"
            "%2Fsessions%2Fmagic%3Ftoken%3DZx81'>Continuer</a></td></tr>"
            "<tr><td><a href='https://acme.io/aide'>Aide</a></td></tr>"
        ),
        codes=(),
        link=(
            "https://click.acme.io/ls/click?upn=https%3A%2F%2Fapp.acme.io%2Fsessions%2Fmagic"
            "%3Ftoken%3DZx81"
        ),
        kinds=("login", "other"),
    ),
    Message(
        id="distractors-link-continuar-with-code-and-order-es",
        subject="Tu código de acceso",
        html=_page(
            "<tr><td>Pedido n.º 4455667 · Total 1.299,00 € · Entrega 28/11 14:00–16:00</td></tr>"
            "<tr><td>Tu código de acceso es <b>813 402</b>.</td></tr>"
            "<tr><td>O pulsa aquí: <a href='https://tienda.acme.es/sessions/magic?t=Qk2'>"
            "Continuar</a></td></tr>"
            "<tr><td><a href='https://tienda.acme.es/pedidos/4455667'>Ver pedido</a></td></tr>"
        ),
        codes=("813402",),
        link="https://tienda.acme.es/sessions/magic?t=Qk2",
        kinds=("login", "other"),
    ),
    Message(
        id="distractors-link-tsuzukeru-sessions-magic-ja",
        subject="Acme からのお知らせ",
        html=_page(
            "<tr><td>以下のボタンから手続きを続けてください。有効期限：2026/11/27 14:15</td></tr>"
            "<tr><td><a href='https://acme.jp/sessions/magic?token=Zx81'>続ける</a></td></tr>"
            "<tr><td><a href='https://acme.jp/faq'>よくある質問</a></td></tr>"
        ),
        codes=(),
        link="https://acme.jp/sessions/magic?token=Zx81",
        kinds=("login", "other"),
    ),
    Message(
        id="distractors-link-continue-shopping-is-not-login",
        subject="You left something in your cart",
        html=_page(
            "<tr><td>Your cart: 2 items, $1,299.00. Saved until 11/30.</td></tr>"
            "<tr><td><a href='https://shop.acme.com/cart?session=77ab'>Continue</a></td></tr>"
            "<tr><td><a href='https://magic.acme.com/deals/2026'>Magic deals</a></td></tr>"
        ),
        codes=(),
        link="https://shop.acme.com/cart?session=77ab",
        kinds=("other", "other"),
    ),
    # ------------------------------------------------------------- numbers, and no code
    Message(
        id="distractors-none-en-order-confirmation",
        subject="Order confirmation #112-4839201-7731902",
        text=(
            "Thanks for your order, Jane!\n\n"
            "Order 112-4839201-7731902, placed 11/27/2026\n"
            "Apple MacBook Air 13-inch 256GB   1 × $1,099.00\n"
            "AppleCare+                        1 × $200.00\n"
            "Subtotal $1,299.00 · Tax $107.17 · Total $1,406.17\n"
            "Delivery: Friday 11/27, 14:00–16:00\n"
            "Please verify your shipping address: 1600 Amphitheatre Parkway, Mountain View, "
            "CA 94043.\n"
            "Tracking code: 1Z999AA10123456784\n"
            "Questions? Call 1-888-280-4331 or reply to this email. Reference 48213907."
        ),
        codes=(),
    ),
    Message(
        id="distractors-none-de-bestellbestaetigung",
        subject="Bestellbestätigung 4455667",
        text=(
            "Vielen Dank für Ihre Bestellung!\n\n"
            "Bestellnummer: 4455667 vom 27.11.2026\n"
            "Artikelnr. 8821907 · Sony WH-1000XM5 · 1 × 349,00 €\n"
            "Versand: 4,99 € · Gesamt: 1.353,99 € inkl. 19 % MwSt.\n"
            "Ihr Gutscheincode WINTER25 wurde eingelöst.\n"
            "Lieferung am 28.11.2026 zwischen 14:00 und 16:00 Uhr an 10115 Berlin.\n"
            "Bitte bestätigen Sie den Empfang. Kundenservice: 030 12345678"
        ),
        codes=(),
    ),
    Message(
        id="distractors-none-fr-confirmation-commande-codes",
        subject="Confirmation de votre commande n° 4455667",
        text=(
            "Commande n° 4455667 du 27/11/2026 — montant : 1 299,00 €\n"
            "Code client : 88421907 · Code postal : 75011\n"
            "Code promo utilisé : NOEL2026\n"
            "Livraison le 28/11 entre 14h et 16h. Suivi colis : 6A12345678901\n"
            "Service client : 01 23 45 67 89"
        ),
        codes=(),
    ),
    Message(
        id="distractors-none-es-pedido-codigos",
        subject="Confirmación de tu pedido",
        text=(
            "Pedido n.º 4455667 del 27/11/2026. Total: 1.299,00 €.\n"
            "Código postal de entrega: 28013. Código de seguimiento: 88421907.\n"
            "Entrega entre las 14:00 y las 16:00. Teléfono: 912 345 678."
        ),
        codes=(),
    ),
    Message(
        id="distractors-none-pt-pedido-rastreio",
        subject="Pedido confirmado",
        text=(
            "Pedido nº 1234567 confirmado em 27/11/2026. Total: R$ 1.299,90.\n"
            "Código de rastreio: BR123456789BR. CEP 01310-100.\n"
            "Protocolo 20261127. Central: (11) 4004-1234."
        ),
        codes=(),
    ),
    Message(
        id="distractors-none-it-ordine-codici",
        subject="Conferma d'ordine",
        text=(
            "Ordine n. 4455667 del 27.11.2026 — Totale 1.234,56 €\n"
            "Codice cliente 88421907 · Codice sconto NATALE25 applicato\n"
            "Consegna tra le 14:00 e le 16:00. Servizio clienti 02 1234 5678."
        ),
        codes=(),
    ),
    Message(
        id="distractors-none-nl-bestelling",
        subject="Bevestiging van je bestelling",
        text=(
            "Bestelnummer 4455667 · 27-11-2026 · Totaal € 1.234,56\n"
            "Kortingscode WELKOM10 gebruikt. Postcode 1012 AB.\n"
            "Bezorging tussen 14:00 en 16:00. Klantnummer 88421907. Bel 020 123 4567."
        ),
        codes=(),
    ),
    Message(
        id="distractors-none-ja-chumon-kakunin",
        subject="ご注文の確認",
        text=(
            "ご注文番号：250-1234567-8901234\n"
            "合計：￥12,800（税込）\n"
            "クーポンコード：WINTER2026 を適用しました。\n"
            "お届け予定：2026年11月28日 14時〜16時\n"
            "〒150-0001 東京都渋谷区神宮前1-2-3\n"
            "お問い合わせ番号：4455-6677-8899"
        ),
        codes=(),
    ),
]
CORPUS += DISTRACTORS


@pytest.mark.parametrize("message", CORPUS, ids=lambda m: m.id)
def test_corpus(message: Message) -> None:
    result = extract(
        subject=message.subject,
        text=message.text,
        html=message.html,
        list_unsubscribe=message.list_unsubscribe,
    )
    assert result["codes"] == list(message.codes)
    assert result["code"] == (message.codes[0] if message.codes else None)
    assert result["link"] == message.link
    if message.links is not None:
        expected = [{"url": u, "text": t, "kind": k} for u, t, k in message.links]
        assert result["links"] == expected
    else:
        assert [link["kind"] for link in result["links"]] == list(message.kinds)
    assert set(result) == {"code", "link", "codes", "links"}


def test_corpus_is_large_and_ids_are_unique() -> None:
    assert len(CORPUS) >= 40
    assert len({m.id for m in CORPUS}) == len(CORPUS)


def test_the_distractor_corpus_covers_codes_links_and_no_codes_in_many_languages() -> None:
    """Issue 28: at least 30 messages crowded with numbers, with and without a code."""
    assert len(DISTRACTORS) >= 30
    assert sum(1 for m in DISTRACTORS if m.codes) >= 20
    assert sum(1 for m in DISTRACTORS if not m.codes and m.link is None) >= 8
    assert sum(1 for m in DISTRACTORS if "sessions" in (m.link or "")) >= 5
    languages = {m.id.split("-")[1] for m in DISTRACTORS if m.id.split("-")[1] != "link"}
    assert {"en", "de", "fr", "es", "pt", "it", "nl", "ja"} <= languages


# ------------------------------------------------------------------------------------- windows


@pytest.mark.parametrize(
    ("offset", "found"), [(1, True), (AFTER_WINDOW, True), (AFTER_WINDOW + 1, False)]
)
def test_after_window(offset: int, found: bool) -> None:
    filler = " " + "x" * (offset - len("  then ")) + " then " if offset > 1 else " "
    assert len(filler) == offset  # the code starts ``offset`` characters after "code"
    result = extract(subject="", text=f"Your code{filler}482913", html="")
    assert result["codes"] == (["482913"] if found else [])


@pytest.mark.parametrize(
    ("offset", "found"),
    [(AFTER_WINDOW + 1, True), (COPULA_WINDOW, True), (COPULA_WINDOW + 1, False)],
)
def test_copula_window(offset: int, found: bool) -> None:
    """After "is" (or ":", "lautet", "è"...) in the keyword's sentence, a code is found
    farther away: "your code for the purchase of ... at ... on ... is 739104"."""
    filler = " " + "x" * (offset - len("  is ")) + " is "
    assert len(filler) == offset
    result = extract(subject="", text=f"Your code{filler}482913", html="")
    assert result["codes"] == (["482913"] if found else [])


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        # the first candidate, unless a later one in the sentence follows "is", ":"...
        ("Your code for store 0412 is 608213.", ["608213"]),
        ("Ihr Code für Sony WH-1000XM5 lautet: 730418", ["730418"]),
        ("Il codice per il 27/11 alle 14:00 è 618 204", ["618204"]),
        ("Your code 4821 is valid until store 0412 closes: 2200", ["4821"]),
        # after the keyword's sentence only a code alone on its line
        ("This code expires in 10 minutes. Keep 48213907 for your records.", []),
        ("Este código caduca pronto.\nProtocolo 20261127", []),
        ("Use the code below to sign in.\n\n  482913  \n", ["482913"]),
        ("Use the code below to sign in.\n【482913】\n", ["482913"]),
        ("Use the code below to sign in.\n482913 (valid for 10 minutes)", ["482913"]),
        ("Use the code below.\n4455667 Sony WH-1000XM5, 349,00 €", []),
        ("コードをお伝えください。\n４７２９１８", ["472918"]),
        # abbreviations end no sentence
        ("Code für Bestellung Nr. 4455667 ist 4821", ["4821"]),
        ("Je code voor Acme B.V. (factuur 20261127) is 4729", ["4729"]),
        ("Your code for Acme Inc. is 4821", ["4821"]),
        ("Your code for Acme Inc. Keep 48213907", []),  # "Inc." before a capital ends it
    ],
)
def test_sentence_and_copula(text: str, codes: list[str]) -> None:
    assert extract(subject="", text=text, html="")["codes"] == codes


@pytest.mark.parametrize(
    "text",
    [
        "Your code: € 1299",
        "Your code: US$ 1500",
        "Your code: R$ 4821",
        "Your code: 1000–5000 USD",
        "Your code applies to 1200〜1500",
        "Your code: 4821 Punkte",
        "Your code: 1200ポイント",
        "Your code: ￥12800",
        "Commande n° 4455667, code 7",
        "Pedido n.º 4455667, code",
        "Your code: IBAN DE89 3704 0044 0532 0130 00",
        "Il codice cliente 4455667",
        "Je code, ordernummer 4455667",
        "合計：12800 コード",
    ],
)
def test_numbers_that_are_not_codes(text: str) -> None:
    assert extract(subject="", text=text, html="")["codes"] == []


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("482913 is your Acme code", ["482913"]),
        ("482913 " + "y" * (BEFORE_WINDOW + 1) + " code", []),
        ("Ref 482913 in the letter. See the code", []),  # other sentence
        ("482913\nYour code is above", []),  # other line
    ],
)
def test_before_window(text: str, codes: list[str]) -> None:
    assert extract(subject="", text=text, html="")["codes"] == codes


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("Your code is 4821", ["4821"]),
        ("Your code is 48213377", ["48213377"]),
        ("Your code is 482", []),
        ("Your code is 482133771", []),
        ("Your code is K7Q2X", ["K7Q2X"]),
        ("Your code is K7Q2XZ9A1B", ["K7Q2XZ9A1B"]),
        ("Your code is K7Q2XZ9A1B2", []),
        ("Your code is ABCDEF", []),
        ("Your code is k7q2xz", []),
        ("Your code is 123-456", ["123-456"]),
        ("Your code is 1234-5678", ["1234-5678"]),
        ("Your code is 555-1234", []),
        ("Your code is 482 913", ["482913"]),
        ("Your code is 482913 OK", ["482913"]),
        ("Your code is ABC 482913", ["482913"]),
        ("Your code is K7QX 2XZ9", ["K7QX2XZ9"]),
        ("Your code is ZARA 0123", ["0123"]),  # a word and a number are not one code
        ("Your code is IBAN DE89", []),
        ("Your code is G-482913", ["G-482913"]),
        ("Your code is 482913%", []),
        ("Your code is $4829", []),
        ("Your code is #482913", []),
        ("Your code is 4829.13", []),
        ("Your code is 482,913", []),
        ("Your code is 48-29-13", []),
        ("Use code SAVE20 today", []),
        ("Use code 20OFF today", []),
        ("Use code GIFT-4821 today", []),
        ("Your code is INV-48213", []),
    ],
)
def test_candidate_shapes(text: str, codes: list[str]) -> None:
    assert extract(subject="", text=text, html="")["codes"] == codes


@pytest.mark.parametrize(
    "text",
    [
        "Your zipcode 94105",
        "decoded 482913 bytes",
        "Barcode 48213907",
        "Use the pincode 4821",
        "Tan 4821 is a colour",
    ],
)
def test_keywords_are_whole_words(text: str) -> None:
    assert extract(subject="", text=text, html="")["codes"] == []


# ------------------------------------------------------------------------------------- contract


def test_never_raises_on_malformed_html() -> None:
    samples = [
        "<a href='https://x.com'>unclosed",
        "<a href=https://x.com/a><a href=https://x.com/b>nested</a></a>",
        "<!-- unterminated comment code 123456",
        "<script>unterminated code 123456",
        "<<<>>><a <b <c href='",
        "<![CDATA[ code 482913 ]]> <?xml?> <!DOCTYPE x>",
        "&#0; &#xFFFFFFFF; &#55296; &bogus; &amp",
        "<head><title>x",
        "\x00\x01\x02\x03\x04 code 482913",
        "<a href='https://x.com/\ud800'>\ud800</a>",
    ]
    for html in samples:
        result = extract(subject=html, text=html, html=html, list_unsubscribe=html)
        assert isinstance(result["codes"], list)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    subject=st.text(max_size=80),
    text=st.text(max_size=400),
    html=st.text(
        alphabet=st.sampled_from(list("<>/a =\"'&#;x0123456789ABCcode-: \n验证码")), max_size=400
    ),
    list_unsubscribe=st.text(max_size=60),
)
def test_never_raises_and_is_deterministic(
    subject: str, text: str, html: str, list_unsubscribe: str
) -> None:
    first = extract(subject=subject, text=text, html=html, list_unsubscribe=list_unsubscribe)
    second = extract(subject=subject, text=text, html=html, list_unsubscribe=list_unsubscribe)
    assert first == second
    assert first["code"] == (first["codes"][0] if first["codes"] else None)
    assert len(set(first["codes"])) == len(first["codes"])
    urls = [link["url"] for link in first["links"]]
    assert len(set(urls)) == len(urls)
    assert all(u.lower().startswith(("http://", "https://")) for u in urls)
    assert first["link"] is None or first["link"] in urls
    assert all(
        link["kind"] in {"verify", "login", "reset", "unsubscribe", "other"}
        for link in first["links"]
    )


def _newsletter(size: int) -> str:
    block = (
        '<table width="100%" style="border-collapse:collapse;mso-table-lspace:0pt"><tr>'
        '<td valign="top" style="padding:9px 18px;color:#202020;font-family:Helvetica;'
        'font-size:16px;line-height:150%;text-align:left">'
        '<h2 style="margin:0">Our 2024 collection</h2><p style="margin:10px 0">Free shipping on '
        "orders over $50. Use code SPRING24 for 20% off, call 1-800-555-0199 or reply to this "
        'email. Your verification code is not needed here.</p><a href="https://click.acme.com/'
        'ls/click?upn=u001.abcdef&amp;utm_source=news" style="color:#007C89">Read more</a>'
        '<img src="https://cdn.acme.com/i.jpg" alt="" width="564"></td></tr></table>\n'
    )
    body = block * (size // len(block) + 1)
    return f"<html><head><style>p{{margin:0}}</style></head><body>{body}</body></html>"[:size]


def test_a_100_kb_newsletter_is_handled() -> None:
    # Speed is measured by `make bench` (tests/benchmarks), never asserted here.
    html = _newsletter(100_000)
    result = extract(subject="Your code", text="", html=html)
    assert result["codes"] == []
    assert all(link["url"].startswith("https://") for link in result["links"])


@pytest.mark.parametrize(
    "body",
    [
        "<a " * 20_000,
        "<!--" * 20_000,
        "code " * 20_000,
        "code 1 " * 20_000,  # keywords and digits everywhere: every line within reach
        "1" * 100_000,
        "A1-" * 30_000,
        "验证码" * 30_000,
        "https://" * 10_000,
        "a@" * 40_000,
    ],
)
def test_pathological_inputs_are_handled(body: str) -> None:
    # These once were quadratic traps; `make bench` times them. Here: no error, sane output.
    result = extract(subject="code", text=body, html=body)
    assert result == extract(subject="code", text=body, html=body)
    assert len(result["codes"]) <= 400


class _Exhaustive(extraction._Scanner):
    """The scanner without its shortcut: every keyword is searched for a code."""

    def _reaches_code(self, kw_start: int, kw_end: int) -> bool:
        return True


_DENSE = [
    "code",
    "is",
    "verification",
    "OTP",
    "PIN",
    "Bestätigungscode",
    "código",
    "код",
    "コード",
    "验证码",
    "인증번호",
    "order",
    "invoice",
    "#12345",
    "2024",
    "10:30",
    "$19.99",
    "AB-123",
    "G-482913",
    "482",
    "913",
    "ABC",
    "482913",
    "123456",
    "7890",
    "ZX9Q2",
    "SAVE20",
    "E-404",
    "+1",
    "555",
    "0100",
    "security",
    "one-time",
    "passcode",
    "2FA",
    "login",
    "verify",
    "Hi",
    "Your",
]


_FILLER = ["please", "use", "the", "below", "to", "finish", "signing", "up", "thanks", "team"]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(_DENSE + _FILLER * 4),
            st.sampled_from([" ", " ", "\n", ". ", ", ", ": ", "-", "\n\n", "　", ""]),
        ),
        max_size=160,
    ),
    st.booleans(),
)
@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_keyword_shortcut_finds_exactly_what_an_exhaustive_search_finds(
    pieces: list[tuple[str, str]], standalone: bool
) -> None:
    text = extraction._prepare("".join(word + sep for word, sep in pieces))
    fast, slow = extraction._Scanner(text), _Exhaustive(text)
    assert extraction._codes_in(fast, fast.keywords(near_codes=True), standalone) == (
        extraction._codes_in(slow, slow.keywords(), standalone)
    )


@pytest.mark.parametrize("gap", range(COPULA_WINDOW + 10))
def test_the_keyword_shortcut_holds_at_every_distance(gap: int) -> None:
    filler = ("please use the below to finish signing up " * 4)[:gap]
    for text in (
        f"verification {filler} 482913",
        f"verification {filler} is 482913",
        f"482913 {filler} is your verification",
    ):
        prepared = extraction._prepare(text)
        fast, slow = extraction._Scanner(prepared), _Exhaustive(prepared)
        assert extraction._codes_in(fast, fast.keywords(near_codes=True), False) == (
            extraction._codes_in(slow, slow.keywords(), False)
        )


# --- keywords near codes: the line-cut scan finds exactly what the whole scan keeps ---------

_LINE_FREE = ("\\s", "\\S", "\\W", "\\D", "[^", ".", "\n")


def test_no_keyword_pattern_can_match_a_line_break() -> None:
    """What makes ``_Scanner._reach`` exact on non-ASCII text: no keyword spans a line break."""
    for pattern in (*extraction._LATIN_KEYWORDS, *extraction._CJK_KEYWORDS):
        assert not any(piece in pattern for piece in _LINE_FREE), pattern


def test_no_keyword_in_ascii_text_is_longer_than_the_reach() -> None:
    """What makes ``_Scanner._reach`` exact on ASCII text: a keyword that can match there has
    a bounded length under ``_KEYWORD_REACH``. Every pattern starts with a literal letter; one
    that starts outside ASCII never matches ASCII text (the Cyrillic ones, of unbounded length)."""
    import re._parser as sre_parse  # the regular expression parser's width of a pattern

    widths = [
        sre_parse.parse(pattern).getwidth()[1]
        for pattern in extraction._LATIN_KEYWORDS
        if pattern[0].isascii()
    ]
    assert len(widths) > 30 and 10 <= max(widths) < extraction._KEYWORD_REACH
    assert all(not p[0].isascii() for p in extraction._LATIN_KEYWORDS if "*" in p or "+" in p)


def _kept_near_codes(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(scan of the lines within reach, whole scan) of the keywords :meth:`_reaches_code`
    keeps (``PIN`` and ``TAN`` count in capitals only, in both)."""
    scanner = extraction._Scanner(extraction._prepare(text))
    cut = scanner.keywords(near_codes=True)
    whole = [s for s in scanner.keywords() if scanner._reaches_code(*s)]
    return cut, whole


@pytest.mark.parametrize("message", CORPUS, ids=lambda m: m.id)
def test_line_cut_keyword_scan_matches_the_whole_scan_on_the_corpus(message: Message) -> None:
    for text in (message.subject, message.text, html_to_text(message.html)):
        cut, whole = _kept_near_codes(text)
        assert cut == whole


_PIECES = st.sampled_from(
    [
        "code",
        "verification code",
        "one-time",
        "one time password",
        "pass code",
        "OTP",
        "PIN",
        "confirm",
        "account",
        "your",
        "認証コード",
        "482913",
        "AB12CD",
        "2024",
        " ",
        "  ",
        "\n",
        "\n\n",
        ":",
        "-",
        ".",
        "x" * 40,
        "é",
    ]
)


@settings(max_examples=examples(1_500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECES, min_size=0, max_size=80))
def test_line_cut_keyword_scan_matches_the_whole_scan_on_generated_text(pieces: list[str]) -> None:
    cut, whole = _kept_near_codes("".join(pieces))
    assert cut == whole


def test_line_cut_keyword_scan_skips_far_lines() -> None:
    """The point of it: a long keyword-dense mail keeps only the lines near its code."""
    filler = "\n".join(["please verify your account and confirm the code below"] * 60)
    text = extraction._prepare(f"Your verification code is 482913.\n\n{filler}")
    scanner = extraction._Scanner(text)
    near = scanner._keyword_spans(near_codes=True)
    assert 0 < len(near) < 10 < len(scanner._keyword_spans())
    assert extract(subject="Your code", text=text, html="")["code"] == "482913"
