"""Secrets, so that text headed for a pushed, permanent note can be refused.

Two kinds of rule: token formats with a distinctive shape (a prefix, a fixed length, a
known host), and secrets recognised by where they stand (a password in a URL, a value
assigned to a name that says key, secret, token or password, a connection string's key),
where the value must also look random. A false alarm costs a retry with --allow-secret,
a missed key costs a rotation. The match itself is never returned.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

# A value counts as random when it is long enough and its characters are spread out,
# by Shannon entropy per character: at most log2 of the length (every character
# different) and of the alphabet (4 bits for hex, ~5.95 for alphanumerics). Random values
# average 3.4 bits (12 alphanumerics), 3.0 (12 hex), 3.8 (16 alphanumerics), 3.2 (16
# hex); the dummies a config line holds stay lower ("test1234test1234" and "changeme"
# 2.75, "abc123abc123" 2.6). So a value of 8 characters or more needs 2.8 bits, or
# log2(length) - 0.5 when shorter than 10 (8 distinct characters reach only 3 bits).
# Measured on 5000 random values each (and on fixtures/secrets/corpus.toml, which every
# threshold between 2.5 and 3.0 passes): of 12 hex digits 20% are let through, of 16
# hex 3%, of 12 alphanumerics 1.5%, of 16 0.5%, of 32 none. Under 8 characters no value
# is scanned: "hunter2" is a weak password, but short values are mostly flags and counts.
MIN_LENGTH = 8
MIN_ENTROPY = 2.8
ENTROPY_SLACK = 0.5
# Runs of letters in a random value are short (mixed case and digits cut them: ~2 letters
# on average for alphanumerics, under 2 for hex); identifiers and words average 4 or more,
# have a vowel in each run of 3 letters or more, and one run of digits at most.
WORD_LENGTH = 3.5

# A value that starts so is a reference, a mask or a template, not the secret itself.
_PLACEHOLDER_START = ("$", "<", "{", "%", "*", "[")

# Words in a name that say its value is a credential...
_SECRET_WORDS = frozenset(
    {
        "key", "keys", "apikey", "accesskey", "secretkey", "privatekey", "masterkey",
        "signingkey", "encryptionkey", "secret", "secrets", "clientsecret", "apisecret",
        "token", "tokens", "authtoken", "accesstoken", "apitoken", "refreshtoken",
        "password", "passwords", "passwd", "pwd", "pass", "passphrase", "credential",
        "credentials",
    }
)  # fmt: skip
# A word run together with others (PGPASSWORD, DBSECRET) says it too when it ends so.
_SECRET_ENDINGS = ("password", "passwd", "secret", "token")
# ...unless a word before it says what else the key is (a sort key, a public key)...
_OTHER_KEYS = frozenset(
    {
        "cache", "sort", "primary", "foreign", "partition", "idempotency", "dedup",
        "dedupe", "lookup", "hash", "row", "shard", "routing", "object", "map", "dict",
        "group", "index", "composite", "unique", "public", "pub", "kms", "gpg", "ssh",
        "license", "hot", "short", "cut",
    }
)  # fmt: skip
# ...or a word after it says the value is about the credential, not the credential.
_ABOUT_IT = frozenset(
    {
        "url", "uri", "endpoint", "type", "count", "ttl", "expiry", "expires", "expiration",
        "length", "len", "file", "path", "name", "id", "ids", "header", "field", "env",
        "var", "prefix", "size", "limit", "max", "min", "format", "version", "hint",
        "policy", "rotation", "reset", "dir", "location", "ref", "arn", "provider",
        "hash", "algorithm", "method", "mode", "source", "store", "vault", "required",
        "enabled", "timeout", "lifetime", "age", "cmd", "command", "helper", "class",
    }
)  # fmt: skip
_NAME_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_PATH = re.compile(r"(?:/[\w.-]+){2,}/?\Z")  # base64 may start with a slash too, rarely so
_LETTER_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_DIGITS = re.compile(r"[0-9]+")
_NAME_RUN = re.compile(r"(?<![\w.-])[\w.-]*\Z")
_WORD_BEFORE = re.compile(r"(?<![\w.-])([A-Za-z]+)[ \t]\Z")
_CODE = re.compile(r"[A-Za-z_][\w.]*[(\[]")  # a call or an index: the value is computed
_VOWEL = re.compile(r"[aeiouyAEIOUY]")


def entropy(text: str) -> float:
    """Shannon entropy of the text's characters, in bits per character."""
    counts = Counter(text).values()
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts)


def looks_random(value: str) -> bool:
    """A value long and spread out enough to be a generated key or a real password, and
    not a word, a dotted or CamelCase identifier, a path or a URL."""
    if len(value) < MIN_LENGTH or value.startswith(_PLACEHOLDER_START):
        return False
    if "://" in value or value.startswith(("~", "./", "../")) or _PATH.match(value):
        return False
    classes = sum(any(test(c) for c in value) for test in (str.islower, str.isupper, str.isdigit))
    if classes < 2:  # one case of letters, or digits alone: words, counts, timestamps
        return False
    if _made_of_words(value) or _CODE.match(value):  # settings.SECRET_KEY, f(x), a[0]
        return False
    return entropy(value) >= min(MIN_ENTROPY, math.log2(len(value)) - ENTROPY_SLACK)


def _made_of_words(value: str) -> bool:
    words = _LETTER_WORD.findall(value)
    return (
        sum(map(len, words)) >= WORD_LENGTH * len(words)
        and len(_DIGITS.findall(value)) <= 1
        and all(len(word) < 3 or _VOWEL.search(word) for word in words)
    )


def names_a_secret(name: str) -> bool:
    """The name (API_TOKEN, client_secret, apiKey, spring.datasource.password) says its
    value is a credential, and no word next to the credential word says otherwise."""
    words = [word.lower() for word in _NAME_WORD.findall(name)]
    for n, word in enumerate(words):
        if word not in _SECRET_WORDS and not word.endswith(_SECRET_ENDINGS):
            continue
        before = words[n - 1] if n else ""
        after = words[n + 1] if n + 1 < len(words) else ""
        if word in ("key", "keys") and before in _OTHER_KEYS:
            continue
        if after in _ABOUT_IT:
            continue
        return True
    return False


def _assigned(match: re.Match[str], text: str) -> bool:
    """A random value given to a name that says it is a credential. The whole name counts
    (the pattern starts at its credential word), and so does the word before it across
    one blank: a "cache key: ..." is no credential. The value is looked at first: it
    rules out most candidates at a fraction of the cost."""
    if not looks_random(match["value"]):
        return False
    start = match.start()
    run = _NAME_RUN.search(text, max(0, start - _LEAD_REACH), start)
    start = run.start() if run else start
    before = _WORD_BEFORE.search(text, max(0, start - _LEAD_REACH), start)
    name = (before.group(1) + "_" if before else "") + text[start : match.start("name")]
    return names_a_secret(name + match["name"])


def _random_value(match: re.Match[str], text: str) -> bool:
    return looks_random(match["value"])


def _not_a_placeholder(match: re.Match[str], text: str) -> bool:
    value = match["value"]
    return not value.startswith(_PLACEHOLDER_START) and not set(value) <= {"*", "x", "X"}


class _Rule(NamedTuple):
    name: str
    pattern: re.Pattern[str]
    # What must stand right before the match (ending with \Z; it moves the reported start
    # back). Patterns start with their literal text rather than with \b or a lookbehind,
    # because a pattern with a literal prefix is searched for ten to thirty times faster.
    lead: re.Pattern[str] | None
    check: Callable[[re.Match[str], str], bool] | None  # (match, text): is it one?


_WORD_START = r"(?<!\w)\Z"  # the match starts a word: \b before the pattern
_BLANK_BEFORE = r"(?<!\S)\Z"
_CREDENTIAL_WORD = r"(?i:key|secret|token|pass|pwd|credential)"
# A value up to the next blank, quote, comma, semicolon or closing brace.
_VALUE = r"(?P<value>[^\s'\"`,;}]+)"

_RULES: tuple[_Rule, ...] = tuple(
    _Rule(name, re.compile(pattern), None if lead is None else re.compile(lead), check)
    for name, pattern, lead, check in (
        (
            "a private key block",
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
            None,
            None,
        ),
        ("an AWS access key id", r"A(?:KIA|SIA|BIA|CCA)[0-9A-Z]{16}\b", _WORD_START, None),
        (
            "an AWS secret access key",
            r"(?i)aws_?secret_?access_?key(?:\s*[=:]\s*|\s+)['\"]?[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])",
            None,
            None,
        ),
        (
            "a GitHub token",
            r"g(?:h[pousr]_[A-Za-z0-9]{36,}|ithub_pat_[A-Za-z0-9_]{22,})",
            _WORD_START,
            None,
        ),
        ("a GitLab token", r"glpat-[A-Za-z0-9_-]{20,}", _WORD_START, None),
        ("a Slack token", r"x(?:ox[abposre]|app-\d)-[A-Za-z0-9-]{10,}", _WORD_START, None),
        (
            "a Slack webhook URL",
            r"hooks\.slack\.com/(?:services|workflows|triggers)/[\w/-]{20,}",
            None,
            None,
        ),
        (
            "a Discord webhook URL",
            r"discord(?:app)?\.com/api/webhooks/\d{15,20}/[\w-]{20,}",
            r"(?<![\w.-])[\w.-]*\Z",
            None,
        ),
        (
            "a Microsoft Teams webhook URL",
            r"(?:\.webhook\.office\.com/webhookb2|outlook\.office(?:365)?\.com/webhook)"
            r"/[\w@-]{20,}/IncomingWebhook/\w{20,}",
            r"(?<![\w.-])[\w.-]*\Z",
            None,
        ),
        ("a signed URL", r"[?&]sig=[\w%+/=-]{20,}", None, None),
        ("a Stripe key", r"[rs]k_(?:live|test)_[A-Za-z0-9]{16,}", _WORD_START, None),
        ("a Stripe key", r"whsec_[A-Za-z0-9]{24,}", _WORD_START, None),
        ("a Google API key", r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])", _WORD_START, None),
        ("an Anthropic API key", r"sk-ant-[A-Za-z0-9_-]{20,}", _WORD_START, None),
        (
            "an OpenAI API key",
            r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}",
            _WORD_START,
            None,
        ),
        ("an npm token", r"npm_[A-Za-z0-9]{36}\b", _WORD_START, None),
        ("a PyPI token", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{40,}", _WORD_START, None),
        ("a Hugging Face token", r"hf_[A-Za-z]{30,}\b", _WORD_START, None),
        ("a Shopify token", r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b", _WORD_START, None),
        ("a DigitalOcean token", r"do[opr]_v1_[a-f0-9]{64}\b", _WORD_START, None),
        ("a SendGrid API key", r"SG\.[\w-]{16,32}\.[\w-]{16,64}", _WORD_START, None),
        ("a Twilio key", r"(?:AC|SK)[0-9a-f]{32}\b", _WORD_START, None),
        ("a Mailgun API key", r"key-[0-9a-f]{32}\b", _WORD_START, None),
        ("a Mailgun API key", r"-[0-9a-f]{8}-[0-9a-f]{8}\b", r"(?<!\w)[0-9a-f]{32}\Z", None),
        ("an Azure client secret", r"Q~[\w~.-]{31,34}", r"(?<![\w~.-])[\w~.]{3}\d\Z", None),
        (
            "an account key",
            r"(?:AccountKey|SharedAccess(?:Key|Signature))\s*=\s*[A-Za-z0-9+/=%]{20,}",
            None,
            None,
        ),
        (
            "a JSON web token",
            r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            _WORD_START,
            None,
        ),
        # Rules that check the value too: any password in a URL or a connection string
        # counts (where it stands says it is one), a value elsewhere only if it is random.
        (
            "a password in a URL",
            r"://[^\s:/@'\"]*:(?P<value>[^\s/@'\"]+)@[^\s/@'\"]",
            r"(?<![\w+.-])[A-Za-z][\w+.-]*\Z",
            _not_a_placeholder,
        ),
        (
            "a password in a connection string",
            r"(?i);\s*(?:password|pwd)\s*=\s*(?P<value>[^;'\"\s]+)",
            None,
            _not_a_placeholder,
        ),
        (
            "a password on a command line",
            r"-(?:u|-user)\s+['\"]?[^\s:'\"]+:" + _VALUE,
            _BLANK_BEFORE,
            _random_value,
        ),
        (
            "a password on a command line",
            r"(?:mysql|mysqldump|mariadb)\b[^\n]{0,200}?\s-p(?P<value>[^\s'\"]+)",
            _WORD_START,
            _not_a_placeholder,
        ),
        (
            "a password on a command line",
            r"(?:redis-cli\b[^\n]{0,200}?\s-a|sshpass\s+-p)\s+['\"]?" + _VALUE,
            _WORD_START,
            _random_value,
        ),
        (
            "a .netrc password",
            r"machine\s+\S+\s+login\s+\S+\s+password\s+" + _VALUE,
            _WORD_START,
            _random_value,
        ),
        (
            "an authorization header credential",
            r"(?:Bearer|Basic|Token)\s+(?P<value>[A-Za-z0-9._~+/=-]{16,})",
            _WORD_START,
            _random_value,
        ),
        (
            "a secret assigned to a name",
            r"(?P<name>"
            + _CREDENTIAL_WORD
            + r"[\w.-]{0,64})['\"]?\s*(?:=|:=|=>|:)\s*['\"]?"
            + _VALUE,
            _NAME_RUN.pattern,
            _assigned,
        ),
        (
            "a secret given to an option",
            r"--(?P<name>[\w-]{0,64}?" + _CREDENTIAL_WORD + r"[\w-]{0,64})\s+['\"]?" + _VALUE,
            _BLANK_BEFORE,
            _assigned,
        ),
    )
)
_LEAD_REACH = 80  # how far back a lead is looked for: longer names are cut there


def _first(rule: _Rule, text: str, before: int) -> int | None:
    """0-based start of the rule's first match in the text that starts before `before`."""
    for match in rule.pattern.finditer(text):
        start = match.start()
        if start >= before:
            return None
        if rule.check is not None and not rule.check(match, text):
            continue
        if rule.lead is not None:
            found = rule.lead.search(text, max(0, start - _LEAD_REACH), start)
            if found is None:
                continue
            start = found.start()
        return start
    return None


def find_secret(text: str) -> tuple[str, int] | None:
    """(what it looks like, 1-based character position) of the first secret found, or None."""
    found: tuple[str, int] | None = None
    for rule in _RULES:
        start = _first(rule, text, len(text) if found is None else found[1] - 1)
        if start is not None:
            found = (rule.name, start + 1)
    return found
