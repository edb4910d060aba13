"""Personal data in business values and transcripts: which keys hold it (``key_class``), which patterns in free text are personal (emails, IBANs, long digit runs, dates), and the masker that replaces each value with a stable keyed token (``PersonalDataMasker``)."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "MIN_DIGITS",
    "PERSONAL_COMPOUNDS",
    "PERSONAL_DATA_RULE_VERSION",
    "PERSONAL_WORDS",
    "PROTECTED_WORDS",
    "TOKEN_RE",
    "PersonalDataMasker",
    "Rule",
    "key_class",
]


TEXT_KEYS = ("text", "transcript", "delta")


PERSONAL_DATA_RULE_VERSION = 1
"""Version of the personal-data rule below (key vocabulary, value patterns, token format)."""


PERSONAL_WORDS: dict[str, str] = {
    **dict.fromkeys(
        (
            "name",
            "names",
            "firstname",
            "lastname",
            "surname",
            "fullname",
            "givenname",
            "familyname",
            "middlename",
            "nickname",
            "username",
        ),
        "name",
    ),
    **dict.fromkeys(("email", "emails", "mail", "mailbox"), "email"),
    **dict.fromkeys(
        ("phone", "phones", "telephone", "tel", "mobile", "cell", "cellphone", "fax", "msisdn"),
        "phone",
    ),
    **dict.fromkeys(("address", "addresses", "street", "postcode", "zipcode", "zip"), "address"),
    **dict.fromkeys(("contact", "contacts"), "contact"),
    **dict.fromkeys(("dob", "birth", "birthday", "birthdate"), "dob"),
    **dict.fromkeys(("card", "pan", "cvv", "cvc"), "card"),
    **dict.fromkeys(("iban", "account"), "account"),
    **dict.fromkeys(("ssn", "passport", "nin"), "id_number"),
    **dict.fromkeys(
        (
            "customer",
            "passenger",
            "patient",
            "guest",
            "recipient",
            "caller",
            "holder",
            "person",
            "attendee",
        ),
        "person",
    ),
    **dict.fromkeys(TEXT_KEYS, "text"),
}
"""A key naming personal data contains one of these words (label of its tokens). Transcript
keys (``TEXT_KEYS``) count too: inside business data they are free text of the customer."""


PROTECTED_WORDS = frozenset(
    (
        "id",
        "ids",
        "uuid",
        "guid",
        "key",
        "keys",
        "status",
        "version",
        "versions",
        "type",
        "kind",
        "action",
        "date",
        "dates",
        "time",
        "times",
        "timestamp",
        "at",
        "ns",
        "ms",
        "amount",
        "price",
        "cost",
        "total",
        "currency",
        "count",
        "quantity",
        "qty",
        "number",
        "no",
        "num",
        "ref",
        "reference",
        "code",
        "seq",
        "index",
    )
)
"""A key whose last word is one of these (``booking_id``, ``status``, ``final_date``,
``amount``, ``task_version``, ``idempotency_key``) holds business values that the task checks
compare with business truth: never masked by key or pattern (only when the very value was
masked elsewhere, see ``mask_business_value``)."""


PERSONAL_COMPOUNDS: dict[str, dict[str, str]] = {
    tail: {
        **dict.fromkeys(("phone", "mobile", "cell", "telephone", "tel", "fax", "contact"), "phone"),
        **dict.fromkeys(("card", "credit", "debit"), "card"),
        **dict.fromkeys(("account", "bank", "routing"), "account"),
        **dict.fromkeys(("passport", "license", "licence", "security", "id"), "id_number"),
        "house": "address",
    }
    for tail in ("number", "no", "num")
}


TOKEN_RE = re.compile(r"<[a-z_]+:[0-9a-f]{10,64}>")
"""A placeholder written by the masking (``<email:3f2a9c81d0>``); never masked again."""


_EMAIL = re.compile(r"(?<![\w.%+-])[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}(?![\w-])")


_IBAN = re.compile(r"(?<!\w)[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?!\w)")


_DIGIT_RUN = re.compile(r"(?<![\w+])\+?\d(?:[ .()-]{0,2}\d){6,}(?!\w|[.-]\w)")


_DATE_LIKE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|(?<!\d)\d{1,2}[./-]\d{1,2}[./-]\d{2,4}(?!\d)"
)
"""ISO dates and datetimes, ``10.08.2026`` and ``10/08/2026``: never taken for digit runs."""


_DECIMAL = re.compile(r"\d+\.\d{1,3}")
"""A number with decimals (``1234567.50``) is an amount, not a digit run."""


MIN_DIGITS = 7
"""A run of this many digits (spaces, dots, dashes and brackets between them allowed) is a
phone number (up to 15 digits) or an account / card number (more)."""


def _key_words(key: str) -> list[str]:
    """``"contactPhone2"`` -> ``["contact", "phone"]``: camel case and separators split, case
    folded, a trailing number dropped."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(key))
    words = [w for w in re.split(r"[^0-9a-z]+", text.casefold()) if w]
    if words:
        words[-1] = words[-1].rstrip("0123456789") or words[-1]
    while len(words) > 1 and words[-1].isdigit():
        words.pop()
    return words


def key_class(key: str) -> tuple[Literal["personal", "protected", "plain"], str | None]:
    """Whether a key names personal data (with the token label), protected business values,
    or neither. Compounds (``phone_number``) first, then a protected last word (``booking_id``)
    or an ``idempotency`` key, then any personal word (``customer_email``)."""
    words = _key_words(key)
    if not words:
        return "plain", None
    if len(words) >= 2:
        label = PERSONAL_COMPOUNDS.get(words[-1], {}).get(words[-2])
        if label is not None:
            return "personal", label
    if words[-1] in PROTECTED_WORDS or "idempotency" in words:
        return "protected", None
    for w in reversed(words):
        if w in PERSONAL_WORDS:
            return "personal", PERSONAL_WORDS[w]
    return "plain", None


def _split_keep(text: str, pattern: re.Pattern[str]) -> list[tuple[bool, str]]:
    """``text`` cut into (matched, part) pieces by ``pattern``."""
    out: list[tuple[bool, str]] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.start() > pos:
            out.append((False, text[pos : m.start()]))
        out.append((True, m.group(0)))
        pos = m.end()
    if pos < len(text):
        out.append((False, text[pos:]))
    return out


def _pattern_matches(text: str) -> list[tuple[int, int, str]]:
    """(start, end, label) of e-mail addresses, IBANs and long digit runs in ``text``, left to
    right without overlaps; tokens and date-like spans are skipped."""
    found: list[tuple[int, int, str]] = []
    pos = 0
    for is_token, part in _split_keep(text, TOKEN_RE):
        if not is_token:
            sub = 0
            for is_date, piece in _split_keep(part, _DATE_LIKE):
                if not is_date:
                    base = pos + sub
                    spans: list[tuple[int, int, str]] = []
                    for m in _EMAIL.finditer(piece):
                        spans.append((base + m.start(), base + m.end(), "email"))
                    for m in _IBAN.finditer(piece):
                        spans.append((base + m.start(), base + m.end(), "iban"))
                    for m in _DIGIT_RUN.finditer(piece):
                        digits = sum(c.isdigit() for c in m.group(0))
                        if digits >= MIN_DIGITS and not _DECIMAL.fullmatch(m.group(0)):
                            label = "phone" if digits <= 15 else "number"
                            spans.append((base + m.start(), base + m.end(), label))
                    spans.sort(key=lambda s: (s[0], -(s[1] - s[0])))
                    end = -1
                    for s in spans:
                        if s[0] >= end:
                            found.append(s)
                            end = s[1]
                sub += len(piece)
        pos += len(part)
    return found


def _norm(value: Any) -> str | None:
    """The canonical form the task checks compare (``task.normalize_value``) of a maskable
    scalar, or None for what is never masked (booleans, None, empty text, containers,
    tokens)."""
    from voxassay.suites.duplex.scoring.values import normalize_value

    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        if not value.strip() or TOKEN_RE.fullmatch(value.strip()):
            return None
    elif not isinstance(value, int | float | dt.date):
        return None
    norm = normalize_value(value)
    return norm if isinstance(norm, str) and norm else None


Rule = Literal["key", "pattern", "value", "text"]


@dataclass
class PersonalDataMasker:
    """Replaces personal data in business values by placeholders that keep equality.

    Two passes over every business value of a bundle: ``collect`` finds what is personal,
    ``mask`` writes the copy. A scalar is personal when its key (or a key above it) names
    personal data (``key_class``), or it is a string that is, or contains, an e-mail address,
    an IBAN or a run of ``MIN_DIGITS`` or more digits (not a date). Each personal value is
    replaced by ``<label:hex>``, ``hex`` the first 10 hex digits (more on a collision) of
    HMAC-SHA256(``key``, its ``task.normalize_value`` form). The token depends only on that
    form, so two values the task checks call equal get one token and unequal values get
    different tokens; and once a value is personal anywhere in the bundle, every equal value
    in any business field is masked too (whole values; inside free text, names and other
    masked values of three or more characters are replaced where they stand), so no
    comparison between two fields changes. Protected keys (ids, statuses, versions, dates,
    amounts, idempotency keys) are never masked by key or pattern.
    """

    key: bytes
    labels: dict[str, str] = field(default_factory=dict)
    """normalized value -> label of its token, from ``collect`` (first seen wins)."""
    tokens: dict[str, str] = field(default_factory=dict)
    masked: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    """(file, field path, rule) -> values masked there."""
    _inline: re.Pattern[str] | None = None
    _frozen: bool = False

    # ---- pass 1

    def collect(self, value: Any, personal: str | None = None, protected: bool = False) -> None:
        if self._frozen:
            raise RuntimeError("collect() after mask(): every value must be collected first")
        if isinstance(value, dict):
            for k, v in value.items():
                p, prot = self._child(k, personal)
                self.collect(v, p, prot)
        elif isinstance(value, list):
            for v in value:
                self.collect(v, personal, protected)
        else:
            norm = _norm(value)
            if norm is None:
                return
            if personal is not None:
                self.labels.setdefault(norm, personal)
            elif isinstance(value, str) and not protected:
                for start, end, label in _pattern_matches(value):
                    n = _norm(value[start:end])
                    if n is not None:
                        self.labels.setdefault(n, label)

    # ---- pass 2

    def mask(
        self,
        value: Any,
        file: str,
        path: str = "",
        personal: str | None = None,
        protected: bool = False,
    ) -> Any:
        """The masked copy of ``value`` (found at ``path`` of ``file``, for the record)."""
        self._freeze()
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                p, prot = self._child(k, personal)
                out[k] = self.mask(v, file, f"{path}.{k}" if path else str(k), p, prot)
            return out
        if isinstance(value, list):
            return [self.mask(v, file, f"{path}[]", personal, protected) for v in value]
        norm = _norm(value)
        if norm is None:
            return value
        if norm in self.labels:
            rule: Rule = "key" if personal is not None else "value"
            if rule == "value" and isinstance(value, str):
                whole = _pattern_matches(value)
                if len(whole) == 1 and whole[0][:2] == (0, len(value)):
                    rule = "pattern"
            self.masked[(file, path, rule)] += 1
            return self.token(norm)
        if not isinstance(value, str) or protected:
            return value
        text, rules = self.mask_free_text(value)
        for r in rules:
            self.masked[(file, path, r)] += 1
        return text

    def mask_free_text(self, text: str) -> tuple[str, list[Rule]]:
        """Free text with e-mail addresses, IBANs, digit runs and masked values of three or
        more characters replaced by their tokens; and which rules fired."""
        self._freeze()
        rules: list[Rule] = []
        pieces: list[str] = []
        pos = 0
        for start, end, _ in _pattern_matches(text):
            n = _norm(text[start:end])
            if n is None or n not in self.labels:
                continue
            pieces += [text[pos:start], self.token(n)]
            pos = end
            rules.append("pattern")
        pieces.append(text[pos:])
        out = "".join(pieces)
        if self._inline is not None:
            parts = []
            for is_token, part in _split_keep(out, TOKEN_RE):
                if not is_token:
                    part, n_sub = self._inline.subn(self._inline_token, part)
                    rules += ["text"] * n_sub
                parts.append(part)
            out = "".join(parts)
        return out, rules

    def token(self, norm: str) -> str:
        """The placeholder of a normalized value (assigned once per masker)."""
        tok = self.tokens.get(norm)
        if tok is None:
            label = self.labels.get(norm, "personal")
            digest = hmac.new(self.key, norm.encode("utf-8"), hashlib.sha256).hexdigest()
            used = set(self.tokens.values())
            n = 10
            tok = f"<{label}:{digest[:n]}>"
            while tok in used:
                n += 6
                tok = f"<{label}:{digest[:n]}>"
            self.tokens[norm] = tok
        return tok

    def record(self) -> dict[str, Any]:
        """What was masked where: per file, each field path with its rule and count."""
        files: dict[str, list[dict[str, Any]]] = {}
        for (file, path, rule), n in sorted(self.masked.items()):
            files.setdefault(file, []).append({"field": path, "rule": rule, "values": n})
        return {
            "rule_version": PERSONAL_DATA_RULE_VERSION,
            "distinct_values": len(self.tokens),
            "files": files,
        }

    # ---- helpers

    @staticmethod
    def _child(key: Any, personal: str | None) -> tuple[str | None, bool]:
        cls, label = key_class(str(key))
        if cls == "personal":
            return label, False
        if cls == "protected":
            return None, True
        return personal, False

    def _freeze(self) -> None:
        if self._frozen:
            return
        self._frozen = True
        inline = sorted(
            (
                n
                for n in self.labels
                if len(n) >= 3
                and (any(c.isalpha() for c in n) or sum(c.isdigit() for c in n) >= MIN_DIGITS)
            ),
            key=lambda n: (-len(n), n),
        )
        if inline:
            alt = "|".join(re.escape(n) for n in inline)
            self._inline = re.compile(rf"(?<!\w)(?:{alt})(?!\w)", re.IGNORECASE)

    def _inline_token(self, m: re.Match[str]) -> str:
        n = _norm(m.group(0))
        return self.token(n) if n is not None and n in self.labels else m.group(0)
