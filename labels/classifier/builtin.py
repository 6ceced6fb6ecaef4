"""The built-in classifier backend: offline, deterministic, pure Python + scikit-learn.

Zero-shot (no examples), a question is parsed into the email concepts it names (by the
:mod:`~labels.classifier.lexicon`: "Is this a password reset email?" names ``password_reset``),
and the email is scored by weighted lexical evidence for those concepts: phrases of the concept
found in the subject (weighted up), the sender or the body, counter-evidence ("free shipping" is
no shipment), conditional boilerplate weighted down ("If you did not request a password reset,
...") and concepts that clearly dominate the email suppressing the others (a newsletter about
passwords is no password reset). The structural signals of the email (``EmailFacts.signals``
from its headers, and those :func:`_meta` reads from its sender, subject and text: quoted
history, a signature, a sign-off with a name, link density, a no-reply sender) are specials of a
``meta`` field that concepts weigh like phrases ("<reply>", "<list>", ...). Questions the lexicon
does not know are answered from their own content words; triggers after a contrast ("..., not
sent by a system") count against their concept. A logistic function turns the evidence into
P(yes).

With examples (a workspace's explicit yes / no answers, manual labels and removals),
scikit-learn's logistic regression is fitted on the zero-shot prior's log-odds (a scaled column,
barely penalised), TF-IDF word n-grams (scikit-learn, sublinear tf) of sender (with the
structural signals as words), subject and body, and the lexicon's concept scores (both
regularised towards 0). Examples that agree with the prior leave it be (:func:`_blend`);
examples that contradict it teach the words they carry; when the prior knows nothing of the
question, the examples decide (:func:`_uninformed`). Synthetic examples built from the lexicon
stand in for a missing class (only positives or only negatives). Fitted models are cached in a
small LRU keyed by a hash of (question, examples) and score new emails in plain Python.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from labels.classifier import lexicon
from labels.classifier.base import EmailFacts, Example, Verdict
from labels.classifier.lexicon import Concept

# -- text normalisation -------------------------------------------------------------------------

BODY_CHARS = 10_000  # the start of a body says what an email is; the rest is mostly footers
SUBJECT_CHARS = 500

_FOLD = str.maketrans({"ß": "ss", "æ": "ae", "œ": "oe", "ø": "o", "đ": "d", "ł": "l", "ı": "i"})
# Words of any script, after folding; Chinese and Japanese characters one by one (those scripts
# do not separate words), so that lexicon phrases in them match as character sequences.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
_TOKEN = re.compile(rf"[^\W_{_CJK}]+|[{_CJK}]|[%$€£¥]")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\s*\n\s*|\s{3,}|\s[|•·—–]\s")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


def fold(text: str) -> str:
    """Lower-cases and strips accents: "Réinitialisez" → "reinitialisez"."""
    if text.isascii():  # nothing to fold but the case (most mail: the cheap path)
        return text.lower()
    text = unicodedata.normalize("NFKD", text.lower().translate(_FOLD))
    return "".join(ch for ch in text if not unicodedata.combining(ch))


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(fold(text))


@dataclass(frozen=True, slots=True)
class Sentence:
    tokens: tuple[str, ...]
    conditional: bool  # "If you did not request this, ..." boilerplate


_CONJUNCTIONS = frozenset({"and", "but", "or", "und", "et", "y", "e", "ou", "o"})


def _is_conditional(toks: Sequence[str], is_question: bool) -> bool:
    start = 1 if len(toks) > 1 and toks[0] in _CONJUNCTIONS else 0
    opener = toks[start : start + 2]
    if opener[0] in lexicon.CONDITIONAL_OPENERS or " ".join(opener) in lexicon.CONDITIONAL_OPENERS:
        return True
    # "Didn't ask for this?" / "Not you?" / "Waren das nicht Sie?"
    return is_question and len(toks) <= 8 and any(t in lexicon.NEGATIONS for t in toks)


def sentences(text: str) -> list[Sentence]:
    out: list[Sentence] = []
    follows_negated_question = False
    for raw in _SENTENCE.split(text):
        toks = tuple(tokens(raw))
        if not toks:
            continue
        is_question = raw.rstrip().endswith("?")
        negated_question = is_question and any(t in lexicon.NEGATIONS for t in toks)
        conditional = _is_conditional(toks, is_question) or (
            follows_negated_question and len(toks) <= 16
        )
        out.append(Sentence(toks, conditional))
        follows_negated_question = negated_question
    return out


# -- patterns the lexicon refers to as <code>, <money>, <pctoff>, <tracknum> ----------------------

_CODE_CANDIDATE = re.compile(
    r"(?<![\w.,/#$€£:-])(?:[A-Z]-)?"
    r"(\d{1,4}(?:[ -]\d{1,4}){1,7}|\d{4,8}|[A-Z0-9]{3,4}-[A-Z0-9]{3,4}"
    r"|(?=[A-Z]*\d)(?=\d*[A-Z])[A-Z0-9]{5,8})"
    r"(?![\w/%$€£:-]|[.,]\d)"
)
_NOT_A_CODE_AFTER = ("%", "off", "discount", "rabatt", "descuento", "sconto", "korting")
_YEAR = re.compile(r"(19|20)\d\d")
_MONEY = re.compile(
    r"[$€£¥]\s?\d[\d,.]*|\b\d[\d,.]*\s?(?:[$€£¥]|(?:usd|eur|gbp|chf|cad|aud|dollars?|euros?)\b)",
    re.IGNORECASE,
)
_PCT_OFF = re.compile(
    r"\d{1,2}\s?%\s*(?:off|de descuento|de desconto|de reduction|rabatt|sconto|korting|discount)"
    r"|(?:save|up to|hasta|bis zu|jusqu.?a|fino al|tot|ate)\s+-?\d{1,2}\s?%"
    r"|(?<![\w+.])-\d{1,2}\s?%"
)
_TRACKNUM = re.compile(r"\b1Z[0-9A-Z]{16}\b|\b[A-Z]{2}\d{9}[A-Z]{2}\b")
_LONG_NUMBER = re.compile(r"\b\d{4}(?: ?\d{4}){2,5}\b|\b\d{10,26}\b")
_TRACK_CONTEXT = ("track", "sendung", "colis", "parcel", "package", "paket", "seguimiento", "suivi")


def _window(text: str, start: int, end: int, before: int, after: int):  # type: ignore[no-untyped-def]
    """The last ``before`` and first ``after`` words around ``text[start:end]``."""
    head = tokens(text[max(0, start - 12 * before) : start])[-before:]
    return head, tokens(text[end : end + 12 * after])[:after]


def _has_code(text: str) -> bool:
    """A one-time code (digits, or an upper-case token with digits) announced by a code word."""
    for match in _CODE_CANDIDATE.finditer(text):
        code = match.group(1)
        grouped = code.replace(" ", "").replace("-", "")
        if grouped != code and grouped.isdigit() and not 4 <= len(grouped) <= 8:
            continue  # a phone or account number, not "482 913"
        line_start = text.rfind("\n", 0, match.start()) + 1
        line_end = text.find("\n", match.end())
        line = text[line_start : line_end if line_end >= 0 else len(text)]
        alone = not line.replace(match.group(0), "").strip(" \t:-–—.")  # the code on its own line
        before, after = _window(text, match.start(), match.end(), 20 if alone else 10, 6)
        near = before[-6:] if not alone else before
        if _YEAR.fullmatch(code) and not any(w in lexicon.CODE_WORDS for w in before[-3:]):
            continue
        if any(w.startswith(lexicon.NOT_A_CODE_CONTEXT) for w in before[-6:]):
            continue
        if any(w in _NOT_A_CODE_AFTER for w in after[:4]):
            continue
        if any(w in lexicon.CODE_WORDS for w in (*near, *after)):
            return True
        if code.isdigit() and any(w in lexicon.CODE_VERBS for w in (*before[-3:], *after[:2])):
            return True
        if any(w.endswith(("code", "codigo", "codice")) for w in (*near, *after)):
            return True
    return False


_QUOTE_HEADER = re.compile(
    r"^(?:on .{4,120} wrote:|am .{4,120} schrieb .{0,80}:|le .{4,120} a (?:e|é)crit ?:|"
    r"el .{4,120} escribi(?:o|ó):|em .{4,120} escreveu:|il .{4,120} ha scritto:|"
    r"op .{4,120} schreef .{0,80}:|.{4,80}(?:wrote|schrieb|a écrit|escribió|escreveu|ha scritto|"
    r"schreef):|-{2,} ?(?:original message|ursprüngliche nachricht|message d'origine|"
    r"mensaje original|mensagem original|messaggio originale|oorspronkelijk bericht) ?-{2,}|"
    r"from: .{3,200}$|von: .{3,200}$|de : .{3,200}$|de: .{3,200}$|van: .{3,200}$|"
    r".{0,60}(?:のメール|より):?$)",
    re.IGNORECASE | re.MULTILINE,
)
# Cheap tests before the expressions: most mail has none of these.
_QUOTE_MARKERS = (
    "wrote",
    "schrieb",
    "crit",
    "escribi",
    "escreveu",
    "scritto",
    "schreef",
    "original",
    "ursprüngliche",
    "origine",
    "oorspronkelijk",
    "from:",
    "von:",
    "de:",
    "de :",
    "van:",
    "のメール",
    "より",
)
_SIGNATURE_MARKERS = ("von meinem", "enviado", "inviato", "verzonden", "get outlook", "iphoneから")
_SIGNATURE = re.compile(
    r"^-- ?$|^(?:sent from my |envoyé de mon |von meinem .{2,30} gesendet|enviado desde mi |"
    r"enviado do meu |inviato da |verzonden (?:met|vanaf) mijn |get outlook for |iphoneから送信)",
    re.IGNORECASE | re.MULTILINE,
)
_REPLY_SUBJECT = re.compile(
    r"^\s*(?:(?:re|aw|antw|sv|vs|rif|res|r|réf|ref|wg|fw|fwd|tr|rv|enc)\s?(?:\[\d+\])?:\s*)+",
    re.IGNORECASE,
)
# Local parts of senders that are roles or machines, not people.
_ROLE_LOCAL = re.compile(
    r"^(?:no-?reply|do-?not-?reply|donotreply|noreply|ne-?pas-?repondre|nao-?responda|"
    r"no-?responder|notifications?|notify|alerts?|news(?:letter)?|info|hello|hi|team|support|"
    r"help|service|billing|invoices?|receipts?|orders?|shipping|account|accounts|security|"
    r"mailer|mailer-daemon|postmaster|bounce[s]?|marketing|promo|offers|updates?|digest|"
    r"system|admin|automated|robot|bot|auto|feedback|contact|customer\w*|kundenservice|"
    r"service-?client|atendimento|reply|calendar|events?|jobs|careers|friends|community|"
    r"members?|welcome|store|shop|sales|deals|talent|recruiting|payroll|hr|"
    r"newsletter\w*|[a-z]*[._-]?(?:no-?reply|alerts?|"
    r"notifications?|news|info|support|billing|updates))(?:[+._-].*)?$",
    re.IGNORECASE,
)
_NOREPLY_LOCAL = re.compile(
    r"no-?reply|do-?not-?reply|donotreply|ne-?pas-?repondre|nao-?responda|no-?responder",
    re.IGNORECASE,
)
_TEAM_WORDS = frozenset(
    {"team", "the", "your", "equipe", "equipo", "equipa", "squadra", "support", "service"}
)


def _meta(email: EmailFacts) -> dict[str, bool]:
    """The structural signals of an email as specials (``<reply>``, ``<quoted>``, ...): the
    header-borne ones it carries, and those read from its sender, subject and text."""
    text = (email.text or "")[:BODY_CHARS]
    words = max(1, len(text.split()))
    local = (email.from_address or "").partition("@")[0]
    name = (email.from_name or "").strip().strip('"')
    role = bool(_ROLE_LOCAL.match(local)) if local else False
    noreply = bool(_NOREPLY_LOCAL.search(local)) if local else False
    found = {f"<{signal}>": True for signal in email.signals}
    low = text.lower()
    quoted_lines = low.count("\n>") + low.startswith(">")
    found["<quoted>"] = quoted_lines >= 2 or (
        any(marker in low for marker in _QUOTE_MARKERS) and bool(_QUOTE_HEADER.search(text))
    )
    found["<signature>"] = (
        "--" in low
        or "sent from" in low
        or "envoy" in low
        or any(m in low for m in _SIGNATURE_MARKERS)
    ) and bool(_SIGNATURE.search(text))
    links = low.count("http://") + low.count("https://") + low.count("www.")
    found["<links>"] = links * 25 >= words and words >= 8
    found["<re>"] = bool(_REPLY_SUBJECT.match(email.subject or ""))
    found["<noreply>"] = noreply
    found["<role>"] = role
    # The sender's address is the sender's own name ("noah.feld@", "k.marshall@"), or the body
    # is signed with it ("Best, Priya"); a word of the name that is in the domain is a brand's,
    # and a name with a role in it ("Maple Delivery Team", "Acme Status") is no person's.
    domain = fold((email.from_address or "").partition("@")[2])
    folded_local = fold(local)
    names = [w for w in tokens(name) if len(w) >= 3 and not w.isdigit()]
    given = [w for w in names if w not in domain or w == folded_local]
    if any(w in _ROLE_WORDS for w in names):
        given = []
    found["<named>"] = (
        not role
        and len(names) >= 2
        and bool(given)
        and (
            given[0] in folded_local
            or (given[-1] in folded_local and folded_local[:1] == given[0][:1])
        )
    )
    raw_lines = text.strip().splitlines()
    tail = [line for line in raw_lines[-4:] if line.strip()][-3:]
    found["<signed>"] = bool(given) and any(
        len(line.split()) <= 5
        and given[0] in tokens(line)
        and not any(w in _TEAM_WORDS for w in tokens(line))
        for line in tail
    )
    # A letter's close: a sign-off line, then a line of one to three names that are not a brand's
    # or a team's ("Kind regards, / Karen Marshall, CPA"; not "Thanks, / The Ledgerly team").
    lines = [line.strip() for line in raw_lines if line.strip()]
    last = lines[-5:]
    own = frozenset(names) if found["<named>"] else frozenset()
    found["<signoff>"] = any(
        _SIGNOFF.match(last[i]) and _is_name_line(last[i + 1], domain, own)
        for i in range(len(last) - 1)
    )
    # A letter's shape: it opens by greeting someone by name ("Dear Mr. Lindqvist,", "Hola
    # Marta:", "山本様") and closes with a person's name ("Stefan Bauer", "Grandpa"). A system
    # greets by name too ("Hi Grace, your sofa ..."), but closes with its brand or team; a
    # newsletter greets nobody in particular ("Dear friend", counter-evidence in the lexicon).
    closes = len(lines) >= 3 and any(_is_name_line(line, domain, own) for line in lines[1:][-3:])
    found["<closing>"] = closes and not found["<signoff>"] and not found["<signed>"]
    found["<letter>"] = closes and _greets_by_name(lines[0] if lines else "")
    return found


def _wordset(text: str) -> frozenset[str]:
    return frozenset(fold(text).split())


# Words of a sender's name or a close that make it a role's, a team's or a brand's, not a person's.
_ROLE_WORDS = _wordset(
    "team crew staff support service services status delivery deliveries expenses operations "
    "ops trust safety security billing accounts notifications alerts news newsletter info help "
    "helpdesk desk sales store shop payroll recruiting talent careers jobs customer customers "
    "care admin system bot updates marketing community events calendar orders shipping "
    "reservations bookings concierge office department kundenservice kundendienst equipe "
    "equipo equipa squadra servizio clienti klantenservice atendimento"
)
_GREETING = re.compile(
    r"^(?:hi|hello|hey|dear|good (?:morning|afternoon|evening)|hallo|liebe[rs]?|"
    r"sehr geehrte[rs]?|guten (?:tag|morgen|abend)|moin|servus|bonjour|bonsoir|salut|coucou|"
    r"ch[eè]re?s?|hola|buen(?:os|as) (?:d[ií]as|tardes|noches)|estimad[oa]s?|querid[oa]s?|"
    r"ol[aá]|oi|bom dia|boa (?:tarde|noite)|prezad[oa]s?|car[oa]|cari|gentile|gentili|"
    r"buongiorno|buonasera|ciao|salve|beste|hoi|dag|goedemorgen|goedemiddag|geachte|lieve)"
    r"\b[\s,]+(.{1,60}?)[\s,:;!.]*$",
    re.IGNORECASE,
)
# Forms of address before a name, skipped to reach it ("Dear Mr. Lindqvist", "Gentile signora").
_TITLES = _wordset(
    "mr mrs ms miss dr prof herr frau familie fam madame monsieur mme mlle m señor senor señora "
    "senora sr sra srta don dona doña senhor senhora signor signora sig sigra dott dottor "
    "dottoressa meneer mevrouw mevr dhr heer"
)
# Whom a bulk mail greets: nobody by name.
_NOBODY = _wordset(
    "customer customers friend friends there all everyone everybody team member members user "
    "users reader readers subscriber subscribers valued sir madam colleagues folks kunde kundin "
    "kunden damen client cliente clientes clienti membre membres usuario usuaria utente klant "
    "klanten lezer lezers lettore lettori leitor leitora amigo amiga amigos guests gaste "
    "invites huespedes ospiti hospedes gasten"
)
_NAME_PARTICLES = _wordset("von van der den de da di del dos das du le la y e ten ter zu")
# Kinship words a family member signs with ("Deine Oma", "Love, Grandpa").
_KIN = _wordset(
    "mum mom mummy mommy dad daddy grandma grandpa granny gran nan nana oma opa mama papa mutti "
    "vati maman mamie papi papy abuela abuelo mamá papá mãe pai avó avô vovó vovô nonna nonno "
    "mamma papà"
)
_POSSESSIVES = _wordset("your yours deine dein eure euer ta ton tu tua tuo je jouw")
# A close that starts with an article or "your" is a brand's or a team's ("De Fietsenwinkel",
# "Ihre Stadtwerke Nord", "Your friends at Acme"), unless a relative signs ("Deine Oma").
_ARTICLES = _wordset(
    "the your our de het die der das ihr ihre unser unsere le la les l votre vos el los las "
    "su sus o os a as il lo gli i vostro vostra equipe"
)
_CJK_NAME = re.compile(r"^[\u3400-\u4dbf\u4e00-\u9fff]{1,4}$")  # kanji: katakana names brands


# "I" in English, German, Dutch, French ("j'ai": "j"), Japanese; the other languages drop the
# pronoun, and French "je" is Dutch "you".
_FIRST_PERSON = frozenset({"i", "ich", "ik", "j", "私", "僕"})


def _greets_by_name(line: str) -> bool:
    """Whether a first line greets someone by name: "Hi Tom,", "Sehr geehrte Familie Yilmaz,",
    "Olá Sr. Costa,", "山本様" (not "Dear customer", "Hello there", "お客様")."""
    line = line.strip()
    if line.endswith(("様", "さん", "さま")) and len(line) <= 16:
        return not line.startswith(("お客", "会員", "各位", "利用者"))
    match = _GREETING.match(line)
    if not match:
        return False
    words = [w.strip(".,") for w in match.group(1).split()]
    while words and fold(words[0]) in _TITLES:
        words = words[1:]
    return (
        bool(words)
        and len(words) <= 3
        and words[0][:1].isupper()
        and fold(words[0]) not in _NOBODY
        and fold(words[0]) not in _ROLE_WORDS
        and not any(ch.isdigit() or ch in "/@" for ch in words[0])
    )


_SIGNOFF = re.compile(
    r"^(?:best|best wishes|kind regards|regards|warm regards|many thanks|thanks|thank you|cheers|"
    r"yours|yours sincerely|sincerely|all the best|love|mit freundlichen gr(?:ü|ue)(?:ß|ss)en|"
    r"viele gr(?:ü|ue)(?:ß|ss)e|liebe gr(?:ü|ue)(?:ß|ss)e|beste gr(?:ü|ue)(?:ß|ss)e|gruß|lg|"
    r"cordialement|bien (?:à vous|cordialement)|bises|amitiés|un saludo|saludos|un abrazo|"
    r"atenciosamente|abraços?|beijos?|cordiali saluti|un saluto|a presto|"
    r"met vriendelijke groet(?:en)?|groetjes|groet|hartelijke groet(?:en)?|groeten|"
    r"herzliche gr(?:ü|ue)(?:ß|ss)e|freundliche gr(?:ü|ue)(?:ß|ss)e|danke|merci|"
    r"bien à (?:toi|vous)|"
    r"à bientôt|atentamente|un cordial saludo|gracias|obrigad[oa]|grazie|distinti saluti|saluti|"
    r"bedankt|take care|talk soon|see you(?: soon)?|warmly|best regards|with thanks|"
    r"(?:melhores |com os melhores )?cumprimentos|obrigad[oa]|um abraço|tschüss|ciao|"
    r"hartelijke groet(?:en)?|vriendelijke groet(?:en)?)[ ,.!]*$",
    re.IGNORECASE,
)


def _is_name_line(line: str, domain: str, own: frozenset[str] = frozenset()) -> bool:
    """A line of one to three names, perhaps with a short title or a note in brackets ("Karen
    Marshall, CPA", "Jo (Squirrels room)", "Grandpa", "Deine Oma", "田中"), that is not a
    brand's (its first word in the sender's domain: "Osteria Nove", "Schulz Elektrotechnik";
    unless it is a word of the sender's own name, ``own``) nor a team's ("The Brewly crew")."""
    if len(line) > 60:  # a sentence (most lines: the cheap test first)
        return False
    if "(" in line:
        line = _BRACKETS.sub(" ", line)
    line = line.strip()
    if line.endswith((",", "!", "?", ":")):  # a sign-off, a wish ("Gute Fahrt!"), a label
        return False
    line = line.rstrip(".")
    if not line.isascii() and _CJK_NAME.match(line):
        return line not in ("以上", "敬具", "草々")
    words = line.replace(",", " ").split()
    if not 1 <= len(words) <= 4 or not words[0][:1].isupper() or _SIGNOFF.match(line):
        return False
    toks = tokens(line)
    if not toks or any(ch.isdigit() or ch in ":@/" for ch in line):  # "Courier: Teo"
        return False
    if len(toks) == 2 and toks[0] in _POSSESSIVES and toks[1] in _KIN:
        return True
    if toks[0] in _ARTICLES:
        return False
    name = line.split(",", 1)[0].split()  # what follows a comma is a title
    if _SIGNOFF.match(name[0]) or all(w.isupper() and len(w) > 1 for w in name):  # "RSVP"
        return False
    return (
        all(w[:1].isupper() or fold(w) in _NAME_PARTICLES for w in name)
        and name[0][:1].isupper()
        and not any(t in _TEAM_WORDS or t in _ROLE_WORDS or t in _FOOTER for t in toks)
        and not (len(toks[0]) >= 4 and toks[0] in domain and toks[0] not in own)
    )


# Links of a footer and buttons, one a line ("Unsubscribe", "Impressum", "Verify email").
_FOOTER = _wordset(
    "unsubscribe preferences privacy terms imprint impressum datenschutz contact help faq "
    "facebook instagram twitter linkedin youtube tiktok desabonner desinscribirse "
    "descadastrar disiscriviti uitschrijven open reply view verify confirm download accept "
    "decline join rsvp login start buy book donate read watch listen zur"
)
_BRACKETS = re.compile(r"\([^)]{0,40}\)")


def _specials(text: str) -> dict[str, bool]:
    found = {
        "<asks>": text.rstrip().endswith("?"),
        "<code>": _has_code(text),
        "<money>": bool(_MONEY.search(text)),
        "<amounts>": len({m.group(0).strip() for m in _MONEY.finditer(text)}) >= 3,
        "<pctoff>": bool(_PCT_OFF.search(fold(text))),
        "<tracknum>": bool(_TRACKNUM.search(text)),
    }
    if not found["<tracknum>"]:
        for match in _LONG_NUMBER.finditer(text):
            before = tokens(text[max(0, match.start() - 80) : match.start()])[-8:]
            if any(w.startswith(_TRACK_CONTEXT) for w in before):
                found["<tracknum>"] = True
                break
    return found


# -- phrase matching ----------------------------------------------------------------------------

MAX_FILLERS = 3
CANDIDATE_CACHE = 50_000  # words whose starting phrases are remembered, per matcher


def _phrase(text: str) -> tuple[str, ...]:
    """A lexicon phrase as pattern tokens: words, "prefix*", "<num>" or a special."""
    if text.startswith("<") and text.endswith(">") and " " not in text:
        return (text,)
    out: list[str] = []
    for word in fold(text).split():
        if word == "<num>":
            out.append(word)
        elif word.endswith("*"):
            out.extend(f"{t}*" for t in _TOKEN.findall(word[:-1]))
        else:
            out.extend(_TOKEN.findall(word))
    return tuple(out)


def _token_matches(token: str, pattern: str) -> bool:
    if pattern.endswith("*"):
        return token.startswith(pattern[:-1])
    if pattern == "<num>":
        return token.isdigit()
    return token == pattern


class PhraseMatcher:
    """Finds which of many phrases occur in a token sequence."""

    def __init__(self, phrases: Iterable[str]) -> None:
        self.phrases: list[tuple[str, ...]] = []
        self.index: dict[tuple[str, ...], int] = {}
        self.exact: dict[str, list[int]] = {}
        self.prefix: dict[str, list[int]] = {}
        self.special: dict[str, int] = {}
        for text in phrases:
            pattern = _phrase(text)
            if not pattern or pattern in self.index:
                continue
            pid = len(self.phrases)
            self.index[pattern] = pid
            self.phrases.append(pattern)
            first = pattern[0]
            if first.startswith("<") and first != "<num>":
                self.special[first] = pid
            elif first.endswith("*"):
                self.prefix.setdefault(first[:-1], []).append(pid)
            else:
                self.exact.setdefault(first, []).append(pid)
        self.prefix_lengths = sorted({len(p) for p in self.prefix})
        self.candidates: dict[str, tuple[int, ...]] = {}

    def id_of(self, text: str) -> int:
        return self.index[_phrase(text)]

    def _rest_matches(self, toks: Sequence[str], i: int, pattern: tuple[str, ...]) -> int:
        """End index of ``pattern[1:]`` matched from ``toks[i]`` on, or -1."""
        j = i
        for part in pattern[1:]:
            skipped = 0
            while j < len(toks) and not _token_matches(toks[j], part):
                if toks[j] in lexicon.FILLERS and skipped < MAX_FILLERS:
                    j += 1
                    skipped += 1
                    continue
                return -1
            if j >= len(toks):
                return -1
            j += 1
        return j

    def spans(self, toks: Sequence[str]) -> Iterable[tuple[int, int, int]]:
        """(phrase id, start, end) of every match."""
        cache = self.candidates
        for i, tok in enumerate(toks):
            candidates = cache.get(tok)
            if candidates is None:
                candidates = self._candidates(tok)
                if len(cache) >= CANDIDATE_CACHE:  # words repeat across mail: keep the common
                    cache.clear()
                cache[tok] = candidates
            for pid in candidates:
                if len(self.phrases[pid]) == 1:
                    yield pid, i, i + 1
                    continue
                end = self._rest_matches(toks, i + 1, self.phrases[pid])
                if end >= 0:
                    yield pid, i, end

    def _candidates(self, tok: str) -> tuple[int, ...]:
        """The phrases that may start at this word."""
        candidates: list[int] = list(self.exact.get(tok, ()))
        if tok.isdigit() and "<num>" in self.exact:
            candidates.extend(self.exact["<num>"])
        for length in self.prefix_lengths:
            if length > len(tok):
                break
            candidates.extend(self.prefix.get(tok[:length], ()))
        return tuple(candidates)


# -- the lexicon, compiled ----------------------------------------------------------------------

FIELDS = ("subject", "sender", "body")
SUPPRESSION_RATIO = 0.5  # another concept suppresses one it beats by this ratio
MIRROR_POINTS = 6.0  # a mirror concept scores this minus its twin: P(yes) = 1 - the twin's
FIELD_WEIGHT = {"subject": 2.0, "sender": 1.5, "body": 1.0, "meta": 1.0}


@dataclass(frozen=True)
class CompiledConcept:
    concept: Concept
    evidence: tuple[tuple[int, float], ...]  # (phrase id, weight)
    requires: frozenset[int]


class CompiledLexicon:
    def __init__(self, concepts: Sequence[Concept]) -> None:
        self.concepts = tuple(concepts)
        self.names = tuple(c.name for c in concepts)
        self.evidence = PhraseMatcher(p for c in concepts for p in c.evidence)
        self.compiled = tuple(
            CompiledConcept(
                c,
                tuple((self.evidence.id_of(p), w) for p, w in c.evidence.items()),
                frozenset(self.evidence.id_of(p) for p in c.requires),
            )
            for c in concepts
        )
        self.trigger_phrases = [(c.name, p, w) for c in concepts for p, w in c.triggers.items()]
        self.triggers = PhraseMatcher(p for _, p, _ in self.trigger_phrases)
        self.trigger_of = {}
        for name, phrase, weight in self.trigger_phrases:
            self.trigger_of.setdefault(self.triggers.id_of(phrase), []).append((name, weight))
        self.position = {name: i for i, name in enumerate(self.names)}
        # phrase id -> (concept index, weight): scoring walks an email's hits only
        self.evidence_of: dict[int, list[tuple[int, float]]] = {}
        for i, cc in enumerate(self.compiled):
            for pid, weight in cc.evidence:
                self.evidence_of.setdefault(pid, []).append((i, weight))
        self.display = [" ".join(p).replace("*", "") for p in self.evidence.phrases]


LEXICON = CompiledLexicon(lexicon.CONCEPTS)


# -- one email, analysed once (cached) ----------------------------------------------------------


@dataclass(frozen=True)
class Analysis:
    fields: dict[str, list[Sentence]]
    # phrase id -> field -> True when found outside conditional boilerplate
    hits: dict[int, dict[str, bool]]
    raw: tuple[float, ...]  # evidence per concept, before suppression
    adjusted: tuple[float, ...]  # after suppression
    contributions: tuple[tuple[tuple[str, str, float], ...], ...]  # per concept: (phrase, field, w)
    meta: tuple[str, ...] = ()  # the structural signals found, as "sig_reply", ...


def _sender_text(email: EmailFacts) -> str:
    name = _CAMEL.sub(" ", email.from_name or "")
    local, _, domain = (email.from_address or "").partition("@")
    return f"{name} {_CAMEL.sub(' ', local)} {domain}"


def _field_sentences(email: EmailFacts) -> dict[str, list[Sentence]]:
    subject = (email.subject or "")[:SUBJECT_CHARS]
    return {
        "subject": [Sentence(tuple(tokens(subject)), False)],
        "sender": [Sentence(tuple(tokens(_sender_text(email))), False)],
        "body": sentences((email.text or "")[:BODY_CHARS]),
        "meta": [],  # structural signals only (specials)
    }


def _hits(fields: dict[str, list[Sentence]], specials: dict[str, dict[str, bool]]):
    hits: dict[int, dict[str, bool]] = {}
    matcher = LEXICON.evidence
    for field, sents in fields.items():
        for sent in sents:
            for pid, _, _ in matcher.spans(sent.tokens):
                by_field = hits.setdefault(pid, {})
                by_field[field] = by_field.get(field, False) or not sent.conditional
        for name, present in specials.get(field, {}).items():
            if present and name in matcher.special:
                hits.setdefault(matcher.special[name], {})[field] = True
    return hits


def _contribution(hit: dict[str, bool], weight: float, conditional: float) -> tuple[str, float]:
    best_field, best = "", 0.0
    for field, plain in hit.items():
        if weight < 0 and field == "sender":
            continue  # counter-evidence is about content: "Booking.com" may send a code
        value = FIELD_WEIGHT[field] * (1.0 if plain else conditional)
        if value > best:
            best_field, best = field, value
    return best_field, weight * best


def _score_concepts(hits: dict[int, dict[str, bool]]):
    """Evidence per concept from the phrases found (walks the hits, not the whole lexicon)."""
    compiled = LEXICON.compiled
    totals = [0.0] * len(compiled)
    parts: list[list[tuple[str, str, float]]] = [[] for _ in compiled]
    for pid, hit in hits.items():
        if not hit:
            continue
        for i, weight in LEXICON.evidence_of.get(pid, ()):
            field, value = _contribution(hit, weight, compiled[i].concept.conditional)
            totals[i] += value
            parts[i].append((LEXICON.display[pid], field, value))
    raw: list[float] = []
    contributions = []
    for i, cc in enumerate(compiled):
        total = totals[i]
        if cc.requires and total > 0 and not any(pid in hits for pid in cc.requires):
            total -= cc.concept.missing_penalty
            missing = f"no {' / '.join(cc.concept.requires[:2])}"
            parts[i].append((missing, "", -cc.concept.missing_penalty))
        raw.append(total)
        contributions.append(tuple(parts[i]))
    adjusted = []
    for i, cc in enumerate(LEXICON.compiled):
        value = raw[i]
        for other, factor in cc.concept.suppressed_by.items():
            j = LEXICON.position[other]
            value -= factor * max(0.0, raw[j] - SUPPRESSION_RATIO * max(0.0, raw[i]))
        adjusted.append(value)
    for i, cc in enumerate(LEXICON.compiled):
        if cc.concept.mirror_of:  # the same evidence read the other way round
            j = LEXICON.position[cc.concept.mirror_of]
            raw[i] = adjusted[i] = MIRROR_POINTS - adjusted[j]
            contributions[i] = tuple((p, f, -v) for p, f, v in contributions[j])
    return tuple(raw), tuple(adjusted), tuple(contributions)


class _LRU:
    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[Hashable, object] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], object]) -> object:
        with self.lock:
            if key in self.data:
                self.data.move_to_end(key)
                return self.data[key]
        value = make()
        with self.lock:
            self.data[key] = value
            while len(self.data) > self.size:
                self.data.popitem(last=False)
        return value


_ANALYSES = _LRU(256)


def analyse(email: EmailFacts) -> Analysis:
    def make() -> Analysis:
        fields = _field_sentences(email)
        specials = {
            "subject": _specials((email.subject or "")[:SUBJECT_CHARS]),
            "body": _specials((email.text or "")[:BODY_CHARS]),
            "meta": _meta(email),
        }
        # The writer speaks as "I" (in the languages that say the pronoun), twice or more.
        said = _FIRST_PERSON.__contains__
        specials["meta"]["<first_person>"] = (
            sum(sum(map(said, sent.tokens)) for sent in fields["body"]) >= 2
        )
        hits = _hits(fields, specials)
        raw, adjusted, contributions = _score_concepts(hits)
        meta = tuple(sorted(f"sig_{k[1:-1]}" for k, v in specials["meta"].items() if v))
        return Analysis(fields, hits, raw, adjusted, contributions, meta)

    return _ANALYSES.get(email, make)  # type: ignore[return-value]


# -- questions ----------------------------------------------------------------------------------

_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ions", "ion", "ers", "er", "ed")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)] + "*"
    if word.endswith("s") and len(word) >= 5:
        return word[:-1] + "*"
    return word + "*" if len(word) >= 5 else word


@dataclass(frozen=True)
class Question:
    text: str
    concepts: tuple[str, ...]  # the lexicon concepts it names, best first
    words: tuple[str, ...]  # content words no concept accounts for
    negated: bool
    adhoc: PhraseMatcher | None  # matcher of ``words`` when no concept is named


_QUESTIONS = _LRU(256)

MIN_TRIGGER = 2.0


def parse_question(question: str) -> Question:
    def make() -> Question:
        toks = tokens(question)
        spans = [
            (name, weight, start, end)
            for pid, start, end in LEXICON.triggers.spans(toks)
            for name, weight in LEXICON.trigger_of[pid]
        ]
        first = min((start for _, _, start, _ in spans), default=len(toks))
        # "written by a person, not sent by a system": what follows a contrast names what the
        # question does not ask about, so those triggers count against their concept.
        contrast = next(
            (i for i in range(first + 1, len(toks)) if toks[i] in lexicon.QUESTION_CONTRASTS),
            len(toks),
        )
        scores: dict[str, float] = {}
        covered: dict[str, set[int]] = {}
        for name, weight, start, end in spans:
            scores[name] = scores.get(name, 0.0) + (weight if start < contrast else -weight)
            covered.setdefault(name, set()).update(range(start, end))
        best = max(scores.values(), default=0.0)
        concepts = tuple(
            sorted(
                (n for n, s in scores.items() if s >= MIN_TRIGGER and s >= 0.5 * best),
                key=lambda n: (-scores[n], n),
            )
        )
        taken = set().union(*covered.values()) if concepts else set()
        words = tuple(
            dict.fromkeys(
                t
                for i, t in enumerate(toks)
                if i not in taken
                and i < contrast
                and t not in lexicon.QUESTION_STOPWORDS
                and len(t) >= 2
            )
        )
        negated = any(t in lexicon.QUESTION_NEGATIONS for t in toks[: min(5, first)])
        adhoc = PhraseMatcher(_stem(w) for w in words) if words and not concepts else None
        return Question(question, concepts, words, negated, adhoc)

    return _QUESTIONS.get(question, make)  # type: ignore[return-value]


# -- zero-shot ----------------------------------------------------------------------------------

SLOPE = 1.0  # logistic slope on evidence points
THRESHOLD = 3.0  # evidence at which P(yes) = 0.5
ADHOC_POINTS = 4.5  # evidence when every content word of an unknown question is in the body


def sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@dataclass(frozen=True)
class Prior:
    logit: float  # log-odds of yes
    evidence: float
    concept: str  # the concept that decided ("" when none)
    matched: tuple[tuple[str, str, float], ...]  # (phrase, field, points), strongest first


def _adhoc_evidence(q: Question, a: Analysis) -> tuple[float, tuple[tuple[str, str, float], ...]]:
    assert q.adhoc is not None
    per_word = ADHOC_POINTS / len(q.adhoc.phrases)
    found: dict[int, tuple[str, float]] = {}
    for field, sents in a.fields.items():
        for sent in sents:
            for pid, _, _ in q.adhoc.spans(sent.tokens):
                value = FIELD_WEIGHT[field] * (0.5 if sent.conditional else 1.0)
                if value > found.get(pid, ("", 0.0))[1]:
                    found[pid] = (field, value)
    matched = tuple(
        (" ".join(q.adhoc.phrases[pid]).rstrip("*"), field, per_word * v)
        for pid, (field, v) in sorted(found.items())
    )
    return sum(m[2] for m in matched), matched


def zero_shot(question: str, email: EmailFacts) -> Prior:
    q = parse_question(question)
    a = analyse(email)
    if q.concepts:
        best: tuple[float, str] | None = None
        for name in q.concepts:
            value = a.adjusted[LEXICON.position[name]]
            if best is None or value > best[0]:
                best = (value, name)
        assert best is not None
        evidence, concept = best
        matched = a.contributions[LEXICON.position[concept]]
    elif q.adhoc is not None:
        evidence, matched = _adhoc_evidence(q, a)
        concept = ""
    else:
        evidence, matched, concept = 0.0, (), ""
    logit = SLOPE * (evidence - THRESHOLD)
    if q.negated:
        logit = -logit
    ordered = tuple(sorted(matched, key=lambda m: (-abs(m[2]), m[0], m[1])))
    return Prior(logit, evidence, concept, ordered)


def _describe(prior: Prior) -> str:
    positive = [m for m in prior.matched if m[2] > 0][:4]
    negative = [m for m in prior.matched if m[2] < 0][:2]
    parts = []
    by_field: dict[str, list[str]] = {}
    for phrase, field, _ in positive:
        by_field.setdefault(field, []).append(phrase)
    if by_field:
        parts.append(
            "matched " + "; ".join(f"{', '.join(p)} in {f}" for f, p in sorted(by_field.items()))
        )
    if negative:
        parts.append("against: " + ", ".join(p for p, _, _ in negative))
    if not parts:
        parts.append("no evidence for it")
    subject = prior.concept.replace("_", " ") if prior.concept else "the question's words"
    return f"{subject}: {'; '.join(parts)}; score {prior.evidence:.2f}"


# -- learning from examples --------------------------------------------------------------------
#
# scikit-learn's LogisticRegression is fitted on the examples' TF-IDF and concept features plus
# the zero-shot prior's log-odds (a scaled column the penalty hardly shrinks) and a penalised bias
# column. The answer blends it with the prior by the number of examples n: logit = (1 - b) *
# prior + b * fitted with b = n / (n + k), k growing with how many of the examples the prior
# already answers right (_blend), so a handful of examples corrects the prior without drowning
# it, and many examples take over.

LAMBDA = 0.3  # L2 penalty on the feature weights
PRIOR_FEATURE_SCALE = 10.0  # the prior's column is scaled up so the penalty hardly shrinks it
BIAS_FEATURE = 0.5  # the bias is a penalised column: the prior knows the base rate better
BLEND_EXAMPLES = 1.0  # with n examples the fitted model has n / (n + 1) of the say ...
BLEND_AGREEMENT = 9.0  # ... + this x the share of them the prior answers right
PRIOR_CLIP = 6.0  # prior log-odds enter clipped: one example may overrule a confident prior
UNINFORMED_LOGIT = -1.0  # the prior's "no" when it knows nothing of the question (_uninformed)
UNINFORMED_LAMBDA = 0.075  # ... and the examples' words are held back less
CONCEPT_FEATURE_SCALE = 0.1  # small: one odd example must not promote a whole concept
# Whether a system sent the email (headers, List-Unsubscribe, sender, a letter's shape: the
# "automated" concept) is learned at full scale: it is read from structure rather than words, so
# five examples of bulk mail teach it where their vocabulary would not carry to the next email.
SYSTEM_CONCEPT = "automated"
SYSTEM_FEATURE_SCALE = 1.0
SYNTHETIC_WEIGHT = 0.5
FIELD_NGRAMS = ((1, 1), (1, 2), (1, 2))  # sender, subject, body
MODEL_CACHE = 64


def documents(email: EmailFacts) -> tuple[str, str, str]:
    """The email's sender, subject and body as token strings for TF-IDF (numbers by length)."""
    a = analyse(email)
    out = []
    for field in FIELDS:
        parts: list[str] = []
        for sent in a.fields[field]:
            parts.extend(f"<{len(t)}>" if t.isdigit() else t for t in sent.tokens)
            parts.append("|")
        if field == "sender":  # the structural signals are learned like words of the sender
            parts.extend(f"{m} |" for m in a.meta)
        out.append(" ".join(parts))
    return out[0], out[1], out[2]


def concept_scales(question: str) -> tuple[float, ...]:
    """How much of each concept's score the example model sees: a little of every concept, and
    the person/system reading (:data:`SYSTEM_CONCEPT`) in full unless the question asks about it
    itself (then it is already the prior)."""
    own = parse_question(question).concepts
    return tuple(
        SYSTEM_FEATURE_SCALE
        if name == SYSTEM_CONCEPT and name not in own
        else CONCEPT_FEATURE_SCALE
        for name in LEXICON.names
    )


def _concept_features(email: EmailFacts, scales: Sequence[float]) -> list[float]:
    return [
        max(-2.0, min(3.0, v * s)) for v, s in zip(analyse(email).adjusted, scales, strict=True)
    ]


def _prototype(concept: Concept) -> EmailFacts:
    """A synthetic email made of a concept's own (positive) phrases."""
    phrases = [
        p.replace("*", "").replace("<num>", "10")
        for p, w in sorted(concept.evidence.items(), key=lambda item: (-item[1], item[0]))
        if w > 0 and not p.startswith("<")
    ]
    return EmailFacts("", "", " ".join(phrases[:3]), ". ".join(phrases))


_PROTOTYPES: dict[str, EmailFacts] = {c.name: _prototype(c) for c in lexicon.CONCEPTS}
_NEUTRAL = EmailFacts("", "", "hello", "thanks, see you soon. best regards")


def _synthetic(q: Question, want: bool) -> list[EmailFacts]:
    """Stand-ins for a class no example shows: the question's own concepts (or words) as
    positives, every other concept (and a neutral note) as negatives."""
    if want:
        if q.concepts:
            return [_PROTOTYPES[n] for n in q.concepts]
        words = " ".join(q.words) or q.text
        return [EmailFacts("", "", words, words)]
    return [_PROTOTYPES[n] for n in LEXICON.names if n not in q.concepts] + [_NEUTRAL]


def _prior_logit(question: str, email: EmailFacts, floor: float = -PRIOR_CLIP) -> float:
    return max(floor, min(PRIOR_CLIP, zero_shot(question, email).logit))


def _uninformed(question: str, emails: Sequence[EmailFacts]) -> bool:
    """Whether the zero-shot prior knows nothing about the question on these emails: it names
    no concept and none of its words occurs in any of them (every answer would be its default
    "no"). Then the examples alone decide, from a prior of :data:`UNINFORMED_LOGIT`."""
    q = parse_question(question)
    return not q.concepts and all(zero_shot(question, e).evidence <= 0 for e in emails)


@dataclass(frozen=True)
class FieldModel:
    """One field's fitted TF-IDF (sublinear tf, l2-normalised) and the weights of its terms."""

    analyzer: Callable[[str], list[str]]
    terms: dict[str, tuple[float, float]]  # term -> (idf, weight)

    def score(self, doc: str) -> float:
        counts: dict[str, int] = {}
        for term in self.analyzer(doc):
            if term in self.terms:
                counts[term] = counts.get(term, 0) + 1
        norm = dot = 0.0
        for term, count in counts.items():
            idf, weight = self.terms[term]
            value = (1.0 + math.log(count)) * idf
            norm += value * value
            dot += value * weight
        return dot / math.sqrt(norm) if norm > 0 else 0.0


@dataclass(frozen=True)
class Model:
    question: str
    fields: tuple[FieldModel, ...]  # sender, subject, body
    concept_weights: tuple[float, ...]
    concept_scales: tuple[float, ...]
    scale: float  # weight of the prior's log-odds
    bias: float
    positives: int
    negatives: int
    synthetic: int  # stand-ins for a class without examples
    blend: float  # how much the fitted model says against the zero-shot prior
    floor: float = -PRIOR_CLIP  # UNINFORMED_LOGIT when the prior knows nothing (_uninformed)

    def logit(self, email: EmailFacts) -> float:
        prior = _prior_logit(self.question, email, self.floor)
        z = self.scale * prior + self.bias
        for field, doc in zip(self.fields, documents(email), strict=True):
            z += field.score(doc)
        features = _concept_features(email, self.concept_scales)
        for weight, value in zip(self.concept_weights, features, strict=True):
            z += weight * value
        return (1.0 - self.blend) * prior + self.blend * z


def _train(x, prior, y, w, penalty=LAMBDA):  # type: ignore[no-untyped-def]
    """Fits logit = a*prior + x.beta + b with scikit-learn's ``LogisticRegression``.

    The prior's log-odds enter as one more column, multiplied by ``PRIOR_FEATURE_SCALE`` so that
    the L2 penalty barely touches its weight (the prior keeps its say), while the word and concept
    weights are regularised towards 0 (``C = 1 / LAMBDA``). The bias is a constant column of
    ``BIAS_FEATURE`` (so it is penalised four times as much): 5+5 balanced examples say little
    about the base rate. Balanced sample weights come in ``w``; lbfgs is deterministic.
    """
    columns = np.column_stack([prior * PRIOR_FEATURE_SCALE, np.full(len(prior), BIAS_FEATURE)])
    design = sparse.hstack([x, sparse.csr_matrix(columns)], format="csr")
    model = LogisticRegression(
        C=1.0 / penalty, solver="lbfgs", max_iter=1000, tol=1e-8, fit_intercept=False
    )
    model.fit(design, y, sample_weight=w)
    coef = model.coef_.ravel()
    return coef[:-2], float(coef[-2] * PRIOR_FEATURE_SCALE), float(coef[-1] * BIAS_FEATURE)


def fit(question: str, examples: Sequence[Example]) -> Model:

    q = parse_question(question)
    emails = [ex.email for ex in examples]
    labels = [ex.positive for ex in examples]
    positives = sum(labels)
    negatives = len(labels) - positives
    # balanced: each class weighs half of the examples
    weights = [len(labels) / (2 * (positives if y else negatives)) for y in labels]
    for want, count in ((True, positives), (False, negatives)):
        if count == 0:
            extra = _synthetic(q, want)
            share = max(1, len(examples)) * SYNTHETIC_WEIGHT / len(extra)
            emails.extend(extra)
            labels.extend([want] * len(extra))
            weights.extend([share] * len(extra))
    docs = [documents(e) for e in emails]
    vectorizers, blocks = [], []
    for i, ngrams in enumerate(FIELD_NGRAMS):
        vectorizer = TfidfVectorizer(
            analyzer="word",
            token_pattern=r"[^ |]+",
            lowercase=False,
            ngram_range=ngrams,
            sublinear_tf=True,
        )
        try:
            blocks.append(vectorizer.fit_transform([d[i] for d in docs]))
        except ValueError:  # no words at all in this field
            vectorizer = None
            blocks.append(sparse.csr_matrix((len(docs), 0)))
        vectorizers.append(vectorizer)
    scales = concept_scales(question)
    concepts = np.array([_concept_features(e, scales) for e in emails])
    x = sparse.hstack([*blocks, sparse.csr_matrix(concepts)], format="csr")
    floor = UNINFORMED_LOGIT if _uninformed(question, emails[: len(examples)]) else -PRIOR_CLIP
    prior = np.array([_prior_logit(question, e, floor) for e in emails])
    penalty = LAMBDA if floor == -PRIOR_CLIP else UNINFORMED_LAMBDA
    beta, scale, bias = _train(x, prior, np.array(labels, dtype=bool), np.array(weights), penalty)
    fields, offset = [], 0
    for vectorizer, block in zip(vectorizers, blocks, strict=True):
        width = block.shape[1]
        if vectorizer is None:
            fields.append(FieldModel(lambda doc: [], {}))
        else:
            idf = vectorizer.idf_.tolist()
            weights = beta[offset : offset + width].tolist()
            terms = {term: (idf[j], weights[j]) for term, j in vectorizer.vocabulary_.items()}
            fields.append(FieldModel(vectorizer.build_analyzer(), terms))
        offset += width
    return Model(
        question,
        tuple(fields),
        tuple(float(v) for v in beta[offset:]),
        scales,
        scale,
        bias,
        positives,
        negatives,
        len(emails) - len(examples),
        _blend(question, examples, informed=floor == -PRIOR_CLIP),
        floor,
    )


def _blend(question: str, examples: Sequence[Example], *, informed: bool) -> float:
    """The fitted model's share of the answer: n / (n + k). k grows with the share of the
    examples the prior already answers right, so examples that agree with an informed prior
    refine it, few examples that contradict it overrule it, and an uninformed prior gives way."""
    n = len(examples)
    if not informed or n == 0:
        return n / (n + BLEND_EXAMPLES)
    agree = sum((zero_shot(question, ex.email).logit >= 0) == ex.positive for ex in examples)
    return n / (n + BLEND_EXAMPLES + BLEND_AGREEMENT * agree / n)


_MODELS = _LRU(MODEL_CACHE)


def examples_key(question: str, examples: Sequence[Example]) -> str:
    """A content hash of (question, examples): a batch with the same label reuses one fit."""
    digest = hashlib.sha256(question.encode())
    for ex in examples:
        for part in (ex.email.from_address, ex.email.from_name, ex.email.subject, ex.email.text):
            digest.update(b"\x00" + (part or "").encode())
        digest.update(b"\x03" + " ".join(sorted(ex.email.signals)).encode())
        digest.update(b"\x01" if ex.positive else b"\x02")
    return digest.hexdigest()


def model_for(question: str, examples: Sequence[Example]) -> Model:
    def make() -> Model:
        with threadpool_limits(limits=1):  # tiny matrices: threads only cost
            return fit(question, examples)

    return _MODELS.get(examples_key(question, examples), make)  # type: ignore[return-value]


# -- the backend --------------------------------------------------------------------------------


def _verdict(p_yes: float, reason: str) -> Verdict:
    p_yes = min(1.0, max(0.0, p_yes))
    answer = p_yes >= 0.5
    confidence = p_yes if answer else 1.0 - p_yes
    return Verdict(answer=answer, confidence=round(confidence, 6), reason=reason)


class BuiltinBackend:
    """Answers yes/no questions about emails from a lexicon and, given examples, from them."""

    def classify(
        self, *, question: str, email: EmailFacts, examples: Sequence[Example] = ()
    ) -> Verdict:
        prior = zero_shot(question, email)
        prior_p = sigmoid(prior.logit)
        if not examples:
            return _verdict(prior_p, f"{_describe(prior)} → P(yes) {prior_p:.2f}")
        model = model_for(question, examples)
        p_yes = sigmoid(model.logit(email))
        synthetic = f" (+{model.synthetic} synthetic)" if model.synthetic else ""
        return _verdict(
            p_yes,
            f"learned from {model.positives} yes / {model.negatives} no examples{synthetic}: "
            f"P(yes) {p_yes:.2f} (prior {prior_p:.2f}: {_describe(prior)})",
        )
