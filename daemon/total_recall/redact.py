"""Secret redaction: API keys, tokens, passwords and private keys become ``[REDACTED:<kind>]``.

Runs over every message before it is stored or sent to an extraction endpoint. Two passes:

1. Token shapes that are secrets wherever they appear (provider key prefixes, JWTs, private key
   blocks, bearer headers, passwords inside URLs). Each pattern starts with a literal so the regex
   engine skips ordinary text quickly.
2. Assignments whose key names a secret (``DB_PASSWORD=...``, ``"api_key": "..."``,
   ``--token ...``). The scan finds the key word first (rare in prose) and only then looks
   around it, so 1 MB of text costs a few milliseconds.

Prose survives: "the password policy is weak" has no assignment, and a lowercase one-word key
followed by a colon and a plain word ("the token: it expires") is read as prose, not config,
unless the two are a line of their own (``password: letmein`` in YAML).

Before both passes, ``<private>...</private>`` is cut out whole (``[private]``). Between them,
the token shapes that Yelp's detect-secrets publishes (Stripe, SendGrid, Twilio, GitLab, npm,
PyPI, Azure storage, Square, Discord, Telegram...) run too, when that package is installed; our
own patterns cover what it has no plugin for (Hugging Face, bare npm tokens, command-line
passwords, ``.env`` names, prose such as "the password is X"). ``redact_batch`` also replaces,
in every text of a batch, each secret value found anywhere in it.

Text holding escapes (a JSON string's ``\\n``, a repr's ``\\t``, a URL's ``%3D``) is read once
more decoded, where a token after the escape starts a word and a name after ``\\n`` starts a line;
each value hidden there is hidden where it stands in the text, its escapes included.
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import heapq
import hmac
import os
import re
import secrets
from collections.abc import Iterable, Iterator, Sequence
from itertools import zip_longest
from pathlib import Path

MARK = "[REDACTED:{}]"

# One character of a bare value: no space or quote, and no escaped newline or tab (text of a JSON
# string or a repr: "-pS3cret\\n" ends before the escape).
_BARE = r"(?:[^\s\"'\\]|\\(?![nrt]))"
# A command-line argument: a quoted value (spaces and all) or a bare word, not a $REFERENCE or a flag.
_ARG = r"""["']?(?P<secret>(?<=")[^"\n]+(?=")|(?<=')[^'\n]+(?=')|(?!\\[nrt])[^\s"'$\-]""" + _BARE + "*)"
# A key naming a secret, in a tool's "config set KEY VALUE".
_CONFIG_KEY = r"(?P<key>[^\s=]*?(?i:secret|token|passw(?:or)?d|api[_\-]?key|_auth)[^\s=]*)"

# A command that reads a secret on its standard input: a login's, or a secret store's "set".
_STDIN_SINK = (
    r"(?:--password-stdin|--with-token|passwd[ \t]+--stdin|\bchpasswd\b|\bsecrets?[ \t]+(?:set|put|create)\b"
    r"|\bversions[ \t]+add\b|\bsecrets:set\b|\benv[ \t]+add\b|\bcargo[ \t]+login\b)"
)

# Keys of the services a developer's sessions name most, by their published prefixes. Each pattern
# starts with its literal (a scan of ~1 ms per MB each); the shorter prefixes also need a digit in
# the body, so a long snake_case name is not a key. Every match must start a word (_WORD_START).
_VENDOR_TOKENS: tuple[tuple[str, str], ...] = (
    ("shopify_token", r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}(?![0-9A-Za-z])"),
    ("linear_key", r"lin_(?:api|oauth)_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{32,}"),
    ("groq_key", r"gsk_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{40,}"),
    ("replicate_token", r"r8_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{30,}"),
    ("perplexity_key", r"pplx-(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{40,}"),
    ("tavily_key", r"tvly-(?:dev-|prod-)?(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{24,}"),
    ("notion_token", r"ntn_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{40,}"),
    ("notion_token", r"secret_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{40,}"),
    ("xai_key", r"xai-(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{40,}"),
    ("pinecone_key", r"pcsk_(?=[A-Za-z0-9_]*\d)[A-Za-z0-9_]{40,}"),
    ("fireworks_key", r"fw_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{20,}"),
    ("cerebras_key", r"csk-(?=[a-z0-9]*\d)[a-z0-9]{40,}"),
    ("voyage_key", r"pa-(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{40,}"),
    ("elevenlabs_key", r"sk_[a-f0-9]{48}(?![0-9A-Za-z])"),
    ("digitalocean_token", r"do[opr]_v1_[a-f0-9]{64}"),
    ("grafana_token", r"gl(?:sa|c)_(?=[A-Za-z0-9+/_=]*\d)[A-Za-z0-9+/_=]{32,}"),
    ("databricks_token", r"dapi[a-f0-9]{32}(?:-\d+)?(?![0-9A-Za-z])"),
    ("planetscale_token", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_\-.]{32,}"),
    ("supabase_key", r"sb(?:p|_secret)_(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{32,}"),
    ("neon_key", r"napi_[a-z0-9]{48,}"),
    ("atlassian_token", r"ATATT3[A-Za-z0-9_\-=]{50,}"),
    ("figma_token", r"figd_[A-Za-z0-9_\-]{30,}"),
    ("airtable_token", r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}"),
    ("hubspot_token", r"pat-(?:na|eu)\d-[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}"),
    ("postman_key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    ("slack_token", r"xapp-\d-[A-Za-z0-9\-]{10,}"),
    ("onepassword_token", r"ops_eyJ[A-Za-z0-9+/=_\-]{40,}"),
    ("langsmith_key", r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}"),
    ("posthog_key", r"phx_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{40,}"),
    ("render_key", r"rnd_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{30,}"),
    ("netlify_token", r"nf[pc]_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{36,}"),
    ("sentry_token", r"sntry[su]_[A-Za-z0-9+/=_\-]{40,}"),
    ("sourcegraph_token", r"sgp_(?:[a-f0-9]{16}_)?[a-f0-9]{40}"),
    ("tailscale_key", r"tskey-(?:auth|api|client|scim|webhook)-[A-Za-z0-9]+-[A-Za-z0-9]{20,}"),
    ("buildkite_token", r"bkua_[a-f0-9]{40}"),
    ("dynatrace_token", r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}"),
    ("newrelic_key", r"NR(?:AK|II|AA|JS)-[A-Z0-9]{19,}"),
    ("stripe_webhook_secret", r"whsec_[A-Za-z0-9]{32,}"),
    ("pulumi_token", r"pul-[a-f0-9]{40}"),
    ("doppler_token", r"dp\.(?:st|ct|pt|sa|scim|audit)\.(?:[a-z0-9\-_]{2,35}\.)?[A-Za-z0-9]{40,}"),
    ("mailgun_key", r"key-[a-f0-9]{32}(?![0-9A-Za-z])"),
    ("dropbox_token", r"sl\.[A-Za-z0-9_\-]{100,}"),
    ("google_refresh_token", r"1//0[A-Za-z0-9_\-]{40,}"),
    ("fly_token", r"fm[12][ar]?_[A-Za-z0-9+/=_\-]{40,}"),
    ("heroku_key", r"HRKU-[A-Za-z0-9_\-]{40,}"),
    ("terraform_token", r"atlasv1\.[A-Za-z0-9_=\-]{60,}"),
    ("docker_token", r"dckr_(?:pat|oat)_[A-Za-z0-9_\-]{20,}"),
    ("resend_key", r"re_(?=[A-Za-z0-9_]*\d)[A-Za-z0-9]{8,}_[A-Za-z0-9]{20,}"),
    ("google_oauth_secret", r"GOCSPX-[A-Za-z0-9_\-]{20,}"),
    ("square_token", r"sq0(?:atp|csp)-[A-Za-z0-9_\-]{20,}"),
    ("fcm_key", r"AAAA[A-Za-z0-9_\-]{7}:APA91b[A-Za-z0-9_\-]{60,}"),
)

# SQL's PASSWORD('X') and PASSWORD 'X': the word must start one, not end a setter's name
# ("keyring.set_password(service, user, X)": the setter's rule reads its last argument).
_SQL_PASSWORD_CALLS = tuple(
    re.compile(lead + r"(?P<q>[\"'])(?P<secret>[^\"'\n]+)(?P=q)")
    for lead in (r"PASSWORD(?:\s*\(\s*|\s+)", r"password\s*\(\s*")
)

# (kind, pattern): the whole match is replaced unless the pattern has a "secret" group, in
# which case only that group is; with a "key" group too, a key that configures rather than holds
# a secret (token_ttl) or a value that is a reference ($TOKEN) is left alone.
# A user and password said as "login admin:Secret_33" / "credentials: deploy:Hunter2!": the part after
# the colon, hidden when it is shaped like a password (_password_shaped: "login host:8080" stays).
_USER_PAIR = re.compile(
    r"(?i:\b(?:log(?:in|[ \t]+in[ \t]+(?:as|with))|sign[ \t]+in[ \t]+(?:as|with)|credentials?|creds)"
    r"(?:[ \t]+(?:is|are|was))?[ \t]*[:=]?[ \t]*)[\w.@+\-]{1,64}:(?P<secret>[^\s:/\"'`,;]{6,64})"
    r"(?=[\s,;!?)]|[.](?:\s|\Z)|\Z)"
)

_TOKEN_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----"
            r"(?:.*?-----END[A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----|.*\Z)",
            re.DOTALL,
        ),
    ),
    # The same block base64-encoded, as a kubeconfig's client-key-data or a Kubernetes secret's
    # tls.key holds it: "-----BEGIN" then "PRIVATE K" at any of the three base64 alignments.
    (
        "private_key",
        re.compile(
            r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{0,24}?(?:UFJJVkFURSBL|QUklWQVRFIEtF|IFBSSVZBVEUgS0VZ)[A-Za-z0-9+/=]*"
        ),
    ),
    # Real keys contain digits; hyphenated prose ("task-specific-...") does not.
    ("anthropic_key", re.compile(r"sk-ant-(?=[\w\-]*\d)[A-Za-z0-9_\-]{16,}")),
    ("openai_key", re.compile(r"sk-(?:proj-|svcacct-|admin-)?(?=[\w\-]*\d)[A-Za-z0-9_\-]{20,}")),
    ("github_token", re.compile(r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("aws_access_key", re.compile(r"(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])")),
    ("slack_token", re.compile(r"xox[abeprs]-[A-Za-z0-9\-]{10,}")),
    ("okta_token", re.compile(r"SSWS\s+(?P<secret>[A-Za-z0-9_\-]{20,})")),
    (
        "azure_subscription_key",
        re.compile(r"Ocp-Apim-Subscription-Key[\"']?\s*[:=]\s*[\"']?(?P<secret>[0-9a-fA-F]{32})"),
    ),
    # presigned URLs carry their signature (and a session's token) in the query string
    ("url_signature", re.compile(r"X-(?:Amz|Goog)-Signature=(?P<secret>[0-9a-fA-F]{32,})")),
    ("aws_session_token", re.compile(r"X-Amz-Security-Token=(?P<secret>[^&\s\"']{16,})")),
    # an STS session token by its opening bytes, in `aws sts … --output text` or a table as in JSON
    ("aws_session_token", re.compile(r"IQoJb3JpZ2lu[A-Za-z0-9+/=]{60,}")),  # one literal each: a scan
    ("aws_session_token", re.compile(r"FwoGZXIvYXdz[A-Za-z0-9+/=]{60,}")),  # of an alternation is slower
    # Go's MySQL DSN: user:PASS@tcp(host:3306)/db
    ("dsn_password", re.compile(r":(?P<secret>[^\s@/:'\"]+)@(?:tcp|unix|udp)\(")),
    ("google_api_key", re.compile(r"AIza[0-9A-Za-z_\-]{35}")),
    ("jwt", re.compile(r"eyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}")),
    # These two start one letter in ("earer", "uthorization"): a pattern that begins with a
    # literal is scanned many times faster than one that begins with a character class;
    # _substitute checks the dropped first letter (_LEAD).
    ("bearer_token", re.compile(r"earer\s+(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)")),
    (
        "authorization",
        re.compile(
            # a header's "Authorization: Basic X", or a server config's `proxy_set_header Authorization
            # "Basic X"` (separated by spaces only when X holds a digit or base64's + / =)
            r"uthorization[\"']?(?:\s*[:=]\s*|[ \t]+(?=[\"']?(?i:basic|token)[ \t]+[\w.~+/\-]*[0-9+/=]))"
            r"[\"']?(?i:basic|token)\s+"
            r"(?P<secret>[A-Za-z0-9._~+/\-]{8,}=*)"
        ),
    ),
    # a short bearer token in an Authorization header (the bearer pattern takes 16 characters or more), when
    # it holds a digit: "Bearer undefined", a JavaScript bug's log line, stays
    (
        "authorization",
        re.compile(
            r"uthorization[\"']?\s*[:=]\s*[\"']?(?i:bearer)\s+"
            r"(?P<secret>(?=[A-Za-z._~+/\-]*\d)[A-Za-z0-9._~+/\-]{8,15}=*)(?![A-Za-z0-9._~+/\-])"
        ),
    ),
    # git config -l after actions/checkout: "http.https://github.com/.extraheader AUTHORIZATION: basic …"
    (
        "authorization",
        re.compile(
            r"UTHORIZATION[\"']?\s*[:=]\s*[\"']?(?i:basic|token|bearer)\s+(?P<secret>[A-Za-z0-9._~+/\-]{8,}=*)"
        ),
    ),
    # scheme://user:pass@host -> keep the user, hide the password (which may itself hold "@":
    # the last "@" before the host ends it).
    # The user may be empty (redis://:PASS@host).
    ("password", re.compile(r"://[^\s:/@\[\]]*:(?P<secret>[^\s/\[\]]+)@(?=[\w.\-]+(?:[:/?#,\s]|\Z)|\[)")),
    ("huggingface_token", re.compile(r"hf_[A-Za-z0-9]{30,}")),
    ("npm_token", re.compile(r"npm_[A-Za-z0-9]{30,}")),
    (
        "npm_token",
        re.compile(r":_auth(?:Token)?=\s*(?P<secret>" + _BARE + r"+)"),
    ),  # .npmrc's _authToken, _auth
    ("gitlab_token", re.compile(r"gl(?:pat|dt|ft|rt|soat|cbt)-[A-Za-z0-9_\-]{20,}")),
    ("stripe_key", re.compile(r"(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}")),
    ("sendgrid_key", re.compile(r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}")),
    ("twilio_key", re.compile(r"SK[0-9a-fA-F]{32}(?![0-9A-Za-z])")),
    ("azure_key", re.compile(r"(?:AccountKey|SharedAccessKey|sig)=(?P<secret>[A-Za-z0-9+/%]{16,}=*)")),
    # Command-line passwords: curl -u user:PASS, mysql -pPASS, sshpass -p PASS.
    ("password", re.compile(r"(?:-u|--user)[ =][\"']?[^\s:\"']+:(?P<secret>" + _BARE + r"+)")),
    (
        "password",
        re.compile(r"mysql(?:dump|admin)?\b[^\n]{0,200}?\s-p" + _ARG),
    ),
    ("password", re.compile(r"sshpass\s+-p\s*[\"']?(?P<secret>" + _BARE + r"+)")),
    ("password", re.compile(r"mariadb(?:-?dump|-?admin)?\b[^\n]{0,200}?\s-p" + _ARG)),
    # redis-cli -a PASS, ssh-keygen -N PASSPHRASE (not the empty ''), openssl enc -k PASS,
    # httpie's http -a user:PASS, aws configure set aws_secret_access_key X, npm config set ...
    ("password", re.compile(r"redis-cli\b[^\n]{0,200}?\s(?:-a|--pass)[ \t]+" + _ARG)),
    ("password", re.compile(r"ssh-keygen\b[^\n]{0,200}?\s-[NP][ \t]*" + _ARG)),
    ("password", re.compile(r"openssl\b[^\n]{0,200}?\s-[kK][ \t]+" + _ARG)),
    (
        "password",
        re.compile(
            r"https?[ \t]+(?:[^\n|;&]{0,200}?[ \t])?(?:-a|--auth)[ =][\"']?[^\s:\"'/]+:(?P<secret>"
            + _BARE
            + r"+)"
        ),
    ),
    (
        "config_secret",
        # "config set" (aws, npm, yarn, pnpm...) or git's "config"; "the config token" is prose.
        re.compile(
            r"config(?:(?:ure)?[ \t]+set|(?<=git[ \t]config))[ \t]+(?:-\S+[ \t]+)*"
            + _CONFIG_KEY
            + r"[ \t]+"
            + _ARG
        ),
    ),
    # docker / podman / oc / az ... login -p PASS; echo PASS | docker login --password-stdin.
    (
        "login_password",
        re.compile(
            r"(?:docker|podman|nerdctl|buildah|skopeo|oc|az|cf|crane|registry)\s+login\b[^\n|;&]{0,200}?"
            r"\s-p[ =]?[\"']?(?P<secret>[^\s\"'$-][^\s\"']*)"
        ),
    ),
    # htpasswd -b FILE USER PASS, smbclient -U user%PASS, openssl -pass pass:PASS.
    (
        "password",
        re.compile(
            r"htpasswd\s+-(?!\w*n)\w*b\w*\s+(?:-\w+\s+)*\S+\s+\S+\s+[\"']?(?P<secret>" + _BARE + r"+)"
        ),
    ),
    (  # htpasswd -nb USER PASS: no file, the hash printed
        "password",
        re.compile(r"htpasswd\s+-(?=\w*n)\w*b\w*\s+(?:-\w+\s+)*\S+\s+[\"']?(?P<secret>" + _BARE + r"+)"),
    ),
    ("password", re.compile(r"-U\s+[\"']?[^\s%\"']+%(?P<secret>" + _BARE + r"+)")),
    ("password", re.compile(r"-pass(?:in|out)?\s+[\"']?pass:(?P<secret>" + _BARE + r"+)")),
    # keytool -storepass/-keypass X, ldapsearch -w X, sqlcmd -P X, mongosh/cqlsh -p X, zip -P X, 7z -pX,
    # rabbitmqctl add_user USER PASS; SQL's IDENTIFIED BY 'X', WITH PASSWORD 'X', PASSWORD('X').
    ("password", re.compile(r"keytool\b[^\n]{0,300}?\s-(?:src|dest)?(?:store|key)pass[ \t]+" + _ARG)),
    (
        "password",
        re.compile(r"ldap(?:search|modify|add|delete|passwd|whoami)\b[^\n]{0,200}?\s-w[ \t]+" + _ARG),
    ),
    ("password", re.compile(r"sqlcmd\b[^\n]{0,200}?\s-P[ \t]*" + _ARG)),
    ("password", re.compile(r"mongo(?:sh|dump|restore|export|import)?\b[^\n]{0,200}?\s-p[ \t]+" + _ARG)),
    ("password", re.compile(r"cqlsh\b[^\n]{0,200}?\s-p[ \t]+" + _ARG)),
    ("password", re.compile(r"zip\b[^\n]{0,200}?\s-P[ \t]+" + _ARG)),
    ("password", re.compile(r"7za?\b[^\n]{0,200}?\s-p(?P<secret>[^\s\"'-]" + _BARE + r"*)")),
    ("password", re.compile(r"rabbitmqctl\s+(?:add_user|change_password)\s+\S+\s+" + _ARG)),
    # SQL, in either case: IDENTIFIED BY 'X', WITH PASSWORD 'X', PASSWORD('X')
    *(
        ("password", re.compile(lead + r"(?P<q>[\"'])(?P<secret>[^\"'\n]+)(?P=q)"))
        for lead in (
            r"IDENTIFIED\s+(?:WITH\s+\w+\s+)?BY\s*",
            r"identified\s+(?:with\s+\w+\s+)?by\s*",
        )
    ),
    *(("password", pattern) for pattern in _SQL_PASSWORD_CALLS),
    # requests' auth=('user', 'PASS') and HTTPBasicAuth('user', 'PASS')
    (
        "password",
        re.compile(
            r"(?:auth=|BasicAuth)\(\s*[\"'][^\"'\n]*[\"']\s*,\s*(?P<q>[\"'])(?P<secret>[^\"'\n]+)(?P=q)"
        ),
    ),
    # .netrc: machine HOST [login USER] password PASS (one line or several).
    (
        "password",
        re.compile(
            r"machine[ \t]+(?:[\w\-]+\.[\w.\-]+|localhost)(?:\s+login[ \t]+\S+)?"
            r"\s+password[ \t]+(?P<secret>" + _BARE + r"+)"
        ),
    ),
    # ~/.docker/config.json: "auth" is base64 of user:password (checked: "auth": "required" stays).
    ("docker_auth", re.compile(r'"auth"[ \t]*:[ \t]*"(?P<secret>[A-Za-z0-9+/]{8,}={0,2})"')),
    # PuTTY's .ppk: the lines after "Private-Lines: N" (the public ones stay); age's secret keys;
    # Google OAuth access tokens; the secret part of Discord webhook and Telegram bot URLs.
    (
        "private_key",
        re.compile(
            r"Private-Lines:[ \t]*\d+[ \t]*\r?\n"
            r"(?P<secret>[A-Za-z0-9+/=]+(?:\r?\n[A-Za-z0-9+/=]+)*)(?=\r?\n|\Z)"
        ),
    ),
    ("age_key", re.compile(r"AGE-SECRET-KEY-1[0-9A-Z]{20,}")),
    ("google_oauth_token", re.compile(r"ya29\.[0-9A-Za-z_\-]{20,}")),
    ("discord_webhook", re.compile(r"discord(?:app)?\.com/api/webhooks/\d+/(?P<secret>[A-Za-z0-9_\-]{20,})")),
    ("telegram_token", re.compile(r"api\.telegram\.org/(?:file/)?bot(?P<secret>\d+:[A-Za-z0-9_\-]{20,})")),
    # HashiCorp Vault tokens, and the one given to `vault login`.
    ("vault_token", re.compile(r"hv[sbr]\.[A-Za-z0-9_\-]{20,}")),
    (
        "vault_token",
        re.compile(
            r"vault\s+login\s+(?:-[^\s;|&]+\s+)*[\"']?(?P<secret>[^\s\"'=;|&-][^\s\"'=;|&]{7,})(?=[\s\"';|&]|\Z)"
        ),
    ),
    # A URL's user part that is a key, with no password after it: a Sentry DSN's key, a token given
    # as the user (https://<token>@host); only a key-shaped one (_key_shaped): "git@", "me@" stay.
    ("url_token", re.compile(r"://(?P<secret>[A-Za-z0-9_\-]{16,})@(?=[\w.\-]+(?:[:/?#\s]|\Z))")),
    (
        "slack_webhook",
        re.compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_/\-]{20,})"),
    ),
    *((kind, re.compile(pattern)) for kind, pattern in _VENDOR_TOKENS),
    # A secret's environment name and its value with only a space between, as pasted from a console or
    # a table ("AWS_SECRET_ACCESS_KEY Zq8R..."); only a key-shaped value (_key_shaped), gated.
    (
        "env_secret",
        re.compile(
            r"(?<![\w$])[A-Z][A-Z0-9_]*(?:SECRET|TOKEN|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|PRIVATE_KEY)"
            r"[A-Z0-9_]*[ \t]+(?P<secret>[A-Za-z0-9/+=_\-]{16,})(?![\w/.])"
        ),
    ),
    # A PIN said in prose ("my PIN is 482913", "pin code: 0042"): digits only.
    (
        "pin",
        re.compile(
            r"(?i:\bpin(?:[ \t]+(?:code|number))?[ \t]*(?:is|was|[:=])[ \t]*)(?P<secret>\d{4,8})(?!\d)"
        ),
    ),
    ("password", _USER_PAIR),
]

_LEAD = {"bearer_token": "Bb", "authorization": "Aa"}
# Kinds whose value must be base64 of "user:password" (Docker's config.json "auth").
_BASIC_AUTH_KINDS = {"docker_auth"}  # header names as written in practice
# Kinds whose value must be key-shaped (_key_shaped): a URL's user part is most often a name.
_KEY_SHAPED_KINDS = {"url_token", "env_secret"}
_WORD_START_KINDS = {
    "huggingface_token",
    "npm_token",
    "gitlab_token",
    "stripe_key",
    "sendgrid_key",
    "twilio_key",
    "vault_token",
    "age_key",
    "google_oauth_token",
} | {kind for kind, _ in _VENDOR_TOKENS}
# Kinds whose match must start a word: "mask-..." or "xghp_..." are not keys.
_WORD_START = {
    "anthropic_key",
    "openai_key",
    "github_token",
    "aws_access_key",
    "slack_token",
    "google_api_key",
    "jwt",
} | _WORD_START_KINDS

# A word that makes a key name sensitive. TOKEN is not sensitive in "max_tokens", "tokenizer".
# Matched against the lowercased text: a case-insensitive regex is several times slower.
# The alternatives share their first letters ("p(?:ass...|wd)"): each "p" of the text is tried once.
_KEY_WORD_SOURCE = (
    r"p(?:ass(?:w(?:or)?d|phrase|code|(?![\w.\-]))|wd(?![\w.\-])|rivate[_\-]?key)|secret"
    r"|token(?!s|iz|_?count|_?limit|_?usage)|a(?:pi|ccess)[_\-]?key|credentials"
)
_KEY_WORD = re.compile(_KEY_WORD_SOURCE)
_KEY_WORD_ANY_CASE = re.compile(_KEY_WORD_SOURCE, re.IGNORECASE)
# Keys named for what they key (WordPress's AUTH_KEY, Laravel's APP_KEY, OAuth 1's consumer key): found
# from "key" (a literal scans fast; their first letters, in the scan above, would be tried at every "a",
# "c" and "l" of the text), the word before it read then.
_KEY_LITERAL = re.compile("key|salt")
_KEY_OWNER = re.compile(
    r"(?:auth|app|client|consumer|licen[cs]e|nonce|logged_in)[_\-]?key|(?:auth|nonce|logged_in)[_\-]?salt",
    re.IGNORECASE,
)
_KEY_OWNER_REACH = len("logged_in_")
_KEY_CHAR = re.compile(r"[\w.\-]")
# After the key: optional closing quote, a separator, then the value.
# An unquoted value ends before an escaped newline or tab (text of a JSON string or a repr:
# "PASSWORD=x\\nHOST=db"), as it ends before a real one.
# A shell line continuation between a name and its value (`KEY=\` then the value on the next line).
_CONTINUED = r"(?:\\(?:[ \t]*\r?\n|[ \t]+)[ \t]*)?"
# Or a string argument after the key's: the next argument of a call (`define('DB_PASSWORD', 'X')`,
# `props.put("password", "X")`), a subscript's assignment (`os.environ["DB_PASSWORD"] = "X"`), Kotlin's
# `to`, a setter's argument (`setPassword("X")`); each only with a quoted value (_argument_value).
_THEN_ASSIGNED = re.compile(r"[ \t]+=(?![=>])")
_KEYWORD_CALL = re.compile(r"[A-Za-z_][\w.]*\([ \t]*[A-Za-z_]\w*=(?!=)")
# A declaration's type between a name and its value: Python's `API_KEY: str = "X"` and `Final[str]`, Rust's
# `const TOKEN: &str = "X"`, Kotlin's `val apiKey: String = "X"`, TypeScript's `token: string | null = …`.
_TYPED = re.compile(
    # (a type's words are letters, with at most two digits at the end: `u8`, `int64`; not a key's value)
    r"[ \t]*:[ \t]*(?:&(?:'\w+[ \t]+)?(?:mut[ \t]+)?)?[A-Za-z_]+\d{0,2}(?:(?:\.|::)[A-Za-z_]+\d{0,2})*"
    r"(?:\[[^\]\n]{0,60}\]|<[^>\n]{0,60}>)?[?!]?"
    r"(?:[ \t]*\|[ \t]*[A-Za-z_][\w.]*)*(?=[ \t]+=(?![=>]))"
)
_ASSIGN_TAIL = re.compile(
    r"""(?P<close>["']?)(?P<sep>[ \t]*(?::=|=>|:(?!:)|=(?!=))[ \t]*"""
    + _CONTINUED
    + r"""|[ \t]*(?P<arg>,|\(|\][ \t]*(?:\|\||\?\?)?=(?!=)|[ \t](?:to|->)[ \t])\s*(?=["']))"""
    r"""(?P<value>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|(?:[^\s"',;)}\]\\]|\\(?![nrt]))+)"""
)
_FLAG_TAIL = re.compile(
    r"""(?P<sep>=|[ \t]+)"""
    + _CONTINUED
    + r"""(?P<value>"[^"\n]*"|'[^'\n]*'|(?!\\[nrt])[^\s"',;)}\]-](?:[^\s"',;)}\]\\]|\\(?![nrt]))*)"""
)
# Unquoted values that are references, not secrets: calls, env lookups, null-ish literals.
# A package's version or range under a name that holds a secret's word ("jsonwebtoken": "^9.0.2",
# `password-hash = "0.5"`, `csrf-token>=1.4,<2`), quoted or not.
_VERSION_SOURCE = (
    r"(?:[\^~]|[<>]=?|[=!~]=)?[ \t]*v?\d+(?:\.\d+){1,3}(?:[-+][\w.\-]+)?"
    r"(?:[ \t]*,[ \t]*(?:[<>]=?|[=!~]=)[ \t]*\d+(?:\.\d+){0,3})*|[\^~]\d+"
)
_VERSION = re.compile(_VERSION_SOURCE)
_NOT_A_SECRET = re.compile(
    # a call or an index, closed or cut by the value's end ("get_pw()", "env['X'].strip()", "f(a",
    # "Hash::make($pw)"), not
    # a password holding brackets ("yourStrong(!)Password")
    r"(?:[A-Za-z_][\w.]*|(?:[A-Z][A-Za-z]*::)+[a-z_]\w*)[(\[](?:[^)\]]*|[^)\]]*[)\]](?:[.(\[,)\]].*)?)"
    r"|\$\{?\w+\}?|<[^>]*>|\*+|\.\.\.|…|%(?:\(\w+\))?[sdr]"
    r"|<{1,3}|<\(.*"  # a redirection: `--with-token <<< X` (the value after it is read there), `<(cmd)`
    # a placeholder for a value given later: SQL's ("?", ":pw", "@Password", "$1"), a format's ("%v", "%q",
    # "{0}", "{}", "{:?}"), an opened tuple or expression ("(" of `FIELDS = ("password", "token")`), a
    # Ruby symbol (`f.password_field :password`)
    r"|\?|[:@][A-Za-z_]+|\$\d+|%[-+# 0]*\d*[vqsdxXfT]|\{\d*\}?|\{:[^}]{0,8}\}?|\("
    # a template or a command's output ("${{ secrets.X }}", "{{ .Values.x }}", "$(gh auth token)"), a
    # CloudFormation function ("!Ref DbPassword"), a reference into the environment, the config or an
    # object ("process.env.KEY", "var.db_password", "settings.SECRET"), a path ("./sa.json",
    # "/tmp/ssh-x/agent.1", "key.pem"), a code keyword
    r"|\$?\{\{.*|\$\(.*|!(?:Ref|Sub|GetAtt|ImportValue|Join|Select|Split|FindInMap|Base64|If|Cidr)\b.*"
    r"|\{|\[|\{[\w$]+:.*|\{[a-z_][a-z0-9_.]*\}?|\[[A-Za-z_$][\w$.]*(?:[,\]].*)?"
    r"|(?:process|os|env|var|local|locals|data|module|settings|config|conf|self|this|window|secrets|params"
    r"|props|ctx|context|request|vars|values|Values|inputs|steps|import\.meta)\.[A-Za-z_$][\w.$]*"
    r"|(?:~|\.{1,2})?/\S*|[\w.\-]+\.(?:json|pem|key|crt|cer|p12|pfx|jks|txt|env|ya?ml|toml|ini|cfg|conf|sock)"
    # code keywords, YAML's booleans, GitHub Actions' `secrets: inherit`
    r"|await|new|yield|async|function|lambda|this|self|require|yes|no|on|off|inherit"
    r"|None|null|nil|undefined|True|False|true|false"
    r"|"
    + _VERSION_SOURCE
    # a field's type where a schema or a class declares it (`api_key: str`, `password: SecretStr`,
    # `password: CharArray`, GraphQL's `token: String!`, Swift's `String?`), a field's number (protobuf's
    # `string password = 2;`), YAML's null
    + r"|(?:str|int|bytes|bool|float|string|number|boolean|any|object|unknown|String|Int|Integer|Long|Bool"
    r"|Boolean|Float|Double|ID|Data|URL|UUID|Secret(?:Str|String|Bytes|Box)?|CharArray|ByteArray|char\[\]"
    r"|(?:Optional|Secret|Option|Vec|List|Array)[\[<][^\]>\n]{1,30}[\]>])[?!]?|\d{1,3}|~",
)
_KIND_OF_WORD = {
    "pass": "password",
    "pwd": "password",
    "passcode": "password",
    "passphrase": "password",
    "passwd": "password",
    "password": "password",
    "secret": "secret",
    "token": "token",
    "credentials": "credentials",
}


# <private>...</private> (any case; an unclosed tag hides the rest of the text).
_PRIVATE = re.compile(
    r"<[ \t]*private[ \t]*>.*?(?:<[ \t]*/[ \t]*private[ \t]*>|\Z)", re.DOTALL | re.IGNORECASE
)
PRIVATE_MARK = "[private]"

# `.env`-style names in capitals that hold a secret: DB_PASS=, STRIPE_KEY=, GH_AUTH_TOKEN=...
# Found like the assignments: the word first (a literal scan), then the name around it and the tail.
_ENV_WORD = re.compile(r"PASS|PWD|SECRET|TOKEN|KEY|CREDENTIAL|AUTH")
_ENV_NAME_CHAR = re.compile(r"[A-Z0-9_]")
# A part of the name (between underscores) that names a secret: DB_PASS, PGPASS, STRIPE_APIKEY,
# HF_TOKEN; KEY, PWD and AUTH only alone or after a word that makes them one (APIKEY, not MONKEY,
# KEYBOARD, AUTHOR or the shell's OLDPWD).
_ENV_SECRET_PART = re.compile(
    r"[A-Z0-9]*(?:PASS(?:WORD|WD|PHRASE)?|SECRETS?|TOKENS?|CREDENTIALS?)"
    r"|(?:API|ACCESS|SECRET|PRIVATE|MASTER|CLIENT|APP|AUTH|DB|SIGNING|ENCRYPTION|SERVICE|LICEN[CS]E"
    r"|SESSION|BOT|DEPLOY|REFRESH|ROOT|ADMIN|USER)?(?:PWD|KEYS?|AUTH)"
)
# Values a schema or form spec gives a field ("password: required"), not a password.
_SCHEMA_WORDS = frozenset(
    "required optional string str text none empty hidden masked redacted blank unset omitted".split()
)
# The shell's own names for folders: PWD=/home/me/app is a path, not a password.
_SHELL_NAMES = frozenset({"PWD", "OLDPWD"})
_ENV_TAIL = re.compile(
    r"""[ \t]*(?P<sep>=|:(?!:))[ \t]*"""
    + _CONTINUED
    + r"""(?P<value>"[^"\n]*"|'[^'\n]*'|(?:[^\s"'#,;)}\]\\]|\\(?![nrt]))+)"""
)
# Prose: "the DB password is X", "my token was X", "the api key for staging is X"; matched on
# the lowercased text (a case-insensitive regex is several times slower), the value taken from
# the text itself.
_PROSE_WORD = re.compile(
    r"p(?:ass(?:w(?:or)?d|phrase|code)|in code|wd?(?![a-z]))|cookie|secret|token|api[ _\-]?key"
)
# How prose joins the word to its value: "is"/"was"/"will be", a colon or "=" ("api key: X"), a
# setting verb's "to"/"as" ("set the password to X", "X as the token"; `to` in the match), or a quote
# ("the password 'X'"); after the word or after a short "for the staging db".
_PROSE_LINK = re.compile(
    r"\b(?:[ \t]+(?:for|of|on|to|at|in)(?:[ \t]+[\w.\-]+){1,3}?)?"
    r"(?:[ \t]+(?:is|was|(?:will|should|must|would)[ \t]+be|(?P<to>to[ \t]+be|to|as))[ \t]*:?"
    r"(?:[ \t]+|[ \t]*\r?\n[ \t]*)"  # the value may stand on the next line
    r"(?:now[ \t]+|still[ \t]+)?|[ \t]*[:=][ \t]*|[ \t]+(?=[\"'`]))"
)
_PROSE_VALUE = re.compile(r"""(?:[^\s"'`,;\\]|\\(?![nrt]))+""")
_QUOTES = "\"'`"
_QUOTED_CHARS = 100  # the longest quoted value read as one (a passphrase of words)
# Or the value right after the word with nothing between ("the client secret 8f3e9a1b..."): only
# a key-shaped value is taken then (see _key_shaped), so "secret sauce" stays; after a password
# word, a password-shaped one too ("use password Hunter2! for the admin"; _password_shaped).
_PROSE_DIRECT = re.compile(r"\b[ \t]+(?P<secret>[A-Za-z0-9_\-+/=]{16,})(?![\w/.])")
_PROSE_DIRECT_PASSWORD = re.compile(r"""\b[ \t]+(?P<secret>[^\s"'`,;\\]{6,64})(?=[\s,;]|\Z)""")
# Hash and key-derivation names follow "password" in prose ("password Argon2id hashing").
_HASH_NAMES = re.compile(r"(?i)(?:argon2(?:id|i|d)?|[bs]crypt|pbkdf2|sha-?\d+|md5|bcrypt\d*|hmac\S*)[.,!?]?")
_FILE_NAME = re.compile(r"[\w\-]+\.[A-Za-z]{1,5}")
_IDENTIFIER = re.compile(r"[a-z][a-z0-9]*(?:[_.][a-z0-9]+)+")  # user_id2, config.v2
_TRAILING = ".!?)]}>:"
_PATH = re.compile(r"(?:/|~/|\.{1,2}/|[A-Za-z]:\\)")  # "pwd: /home/me/app" names a folder
_MIN_RECUR = 6  # shorter values ("abc") recur in ordinary text by chance


def _detect_secrets_patterns() -> list[tuple[str, re.Pattern[str]]]:
    """The token-shape regexes of Yelp's detect-secrets plugins, when the package is installed.

    Only the plugins whose patterns start with a literal (fast, few false positives); its
    keyword, entropy and IP plugins are left out (our assignment pass covers keywords; entropy
    and IPs would redact commit hashes and addresses), and so is npm's (its `//.+/` prefix is
    quadratic on long lines; our own npm patterns cover it).
    """
    try:
        from detect_secrets.plugins import (
            aws,
            azure_storage_key,
            discord,
            github_token,
            gitlab_token,
            jwt,
            openai,
            pypi_token,
            sendgrid,
            slack,
            square_oauth,
            stripe,
            telegram_token,
            twilio,
        )
    except Exception:  # noqa: BLE001 - any import problem means: our own patterns only
        return []
    plugins = [
        ("aws_access_key", aws.AWSKeyDetector),
        ("azure_key", azure_storage_key.AzureStorageKeyDetector),
        ("discord_token", discord.DiscordBotTokenDetector),
        ("github_token", github_token.GitHubTokenDetector),
        ("gitlab_token", gitlab_token.GitLabTokenDetector),
        ("jwt", jwt.JwtTokenDetector),
        ("openai_key", openai.OpenAIDetector),
        ("pypi_token", pypi_token.PypiTokenDetector),
        ("sendgrid_key", sendgrid.SendGridDetector),
        ("slack_token", slack.SlackDetector),
        ("square_key", square_oauth.SquareOAuthDetector),
        ("stripe_key", stripe.StripeDetector),
        ("telegram_token", telegram_token.TelegramBotTokenDetector),
        ("twilio_key", twilio.TwilioKeyDetector),
    ]
    out = []
    for kind, plugin in plugins:
        for pattern in getattr(plugin, "denylist", ()):
            out.append((kind, pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)))
    return out


_LIBRARY_PATTERNS = _detect_secrets_patterns()

# Patterns that cannot start on a literal scan every position of the text; they run only when a
# cheaper test passes first: a substring test on the lowercased text, or a gate regex that starts
# on a literal. (A pattern that starts with a literal is fast on its own and needs no gate; a
# substring test per literal costs about 1 ms per MB, so gates are kept few.)
_GATES: dict[str, tuple[str, ...] | re.Pattern[str]] = {
    "login_password": (" login",),
    "env_secret": ("secret", "token", "passw", "_key"),
    "pin": ("pin",),
    "dsn_password": ("@tcp(", "@unix(", "@udp("),
    "stripe_key": ("_live_", "_test_"),
    "azure_key": ("accountkey=", "sharedaccesskey=", "sig="),
    "telegram_token": re.compile(r":[0-9A-Za-z_-]{20}"),  # detect-secrets' 35, a bot URL's 20+
    "discord_token": re.compile(r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}"),
}


def _open(kind: str, text: str, lowered: str) -> bool:
    gate = _GATES.get(kind)
    if gate is None:
        return True
    if isinstance(gate, re.Pattern):
        return gate.search(text) is not None
    return any(literal in lowered for literal in gate)


def strip_private(text: str) -> str:
    """``text`` with every ``<private>...</private>`` part replaced by ``[private]``."""
    if not text or "<" not in text:
        return text
    return _PRIVATE.sub(PRIVATE_MARK, text)


def redact_json_batch(values: list) -> list:
    """Each parsed JSON value (a str too) with every string in it redacted, keys included; as in
    ``redact_batch``, a secret value found in one string is replaced in all of them.

    The strings of one value are redacted as one text (one pass per value, not per string),
    joined by a line no pattern reads across.
    """
    strings = [list(_json_strings(v)) for v in values]
    results = [_redact(_JOIN.join(own)) for own in strings]
    found = _recurring({v: k for _, _, vs in results for v, k in vs.items()})
    out = []
    for value, own, (text, _, _) in zip(values, strings, results):
        clean = _replace_values(text, found).split(_JOIN) if own else []
        if len(clean) != len(own):
            # Trigger: a replacement ran over the join (an unclosed private key block or
            # <private> part hides the rest of its text). Why: the strings no longer line up.
            # Outcome: each string of this value redacted on its own.
            clean = [_replace_values(_redact(s)[0], found) for s in own]
        out.append(_rebuild_json(value, iter(clean)))
    return out


_JOIN = "\n\x00\n"


def _json_strings(obj) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield key
            yield from _json_strings(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _json_strings(value)


def _rebuild_json(obj, strings: Iterator[str]):
    """``obj`` with its strings taken in turn from ``strings`` (in ``_json_strings``' order)."""
    if isinstance(obj, str):
        return next(strings)
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            key = next(strings)
            out[key] = _rebuild_json(value, strings)
        return out
    if isinstance(obj, list):
        return [_rebuild_json(value, strings) for value in obj]
    return obj


# A shell command whose output is a secret itself: a Kubernetes secret decoded or read, a secrets
# or password manager's read, the token a CLI prints, a variable named for a secret echoed, random
# bytes made for a key. Its output says the value alone, with no name before it to give it away.
REVEALS = re.compile(
    r"\bbase64 (?:-d|--decode|-D)\b"
    r"|\bkubectl\b[^|;&]*\bget secrets?\b[^|;&]*(?:jsonpath|template)"
    r"|\baws secretsmanager get-secret-value\b|\baws ssm get-parameters?\b[^|;&]*--with-decryption"
    r"|\bgcloud secrets versions access\b|\baz keyvault secret show\b|\bdoppler secrets get\b"
    r"|\bvault (?:kv get|read)\b|\bop (?:read|item get)\b|(?:^|[;&|(]\s*)pass(?: show)? [\w./-]+"
    r"|\bgh auth token\b|\bheroku auth:token\b|\bsecurity find-(?:generic|internet)-password\b[^|;&]*\s-w\b"
    r"|\b(?:echo|printf)\b[^|;&]*\$\{?\w*(?:token|secret|passw(?:or)?d|pass|key|credential|auth)\w*"
    r"|\bprintenv\b[^|;&]*(?:token|secret|passw(?:or)?d|pass|key|credential)"
    r"|\bopenssl rand\b|\binitialAdminPassword\b|\bterraform output\b[^|;&]*-raw\b"
    r"|\baws ecr get-login-password\b|\bjq\b[^|;&]*\.(?:token|password|secret|api_?key|access_?token)\b"
    r"|\brails secret\b",
    re.IGNORECASE,
)
_ONE_WORD = re.compile(r"^\s*(\S{6,})\s*$")
# A word every command REVEALS names holds (the regex alone costs ~10 µs a command, most of them none)
_REVEAL_WORDS = (
    "base64",
    "secret",
    "ssm",
    "vault",
    "op ",
    "pass",
    "auth",
    "echo",
    "printf",
    "printenv",
    "openssl",
    "terraform",
    "token",
    "rails",
)


def reveals(command: str) -> bool:
    """Whether a shell command prints a secret (REVEALS), a cheap look for its words first."""
    lowered = command.lower()
    if not any(word in lowered for word in _REVEAL_WORDS) or (found := REVEALS.search(command)) is None:
        return False
    if not found.group(0).lstrip("|;&( ").lower().startswith(("echo", "printf", "printenv")):
        return True
    # a variable named for a secret, not one that only holds its word (GIT_AUTHOR_EMAIL, SSH_AUTH_SOCK)
    names = re.findall(r"\$\{?(\w+)", command) or re.findall(r"printenv\s+(\w+)", command)
    return any(_secret_name(name) for name in names)


def _secret_name(name: str) -> bool:
    parts = _name_parts(name) or [name.upper()]
    return any(part in _SECRET_PARTS for part in parts) and not _settings_key(name)


_MARK_TAIL = re.compile(r"(\[REDACTED:\w+\])[A-Za-z0-9_\-]+")
_PROMPT_LINE = re.compile(r"^[ \t]*[$%#][ \t]+(?P<command>\S.*)$", re.MULTILINE)


def _redact_pasted_session(text: str, values: dict[str, str]) -> tuple[str, int]:
    """Each prompt line whose command prints a secret: its output, up to the next prompt line."""
    prompts = list(_PROMPT_LINE.finditer(text))
    total = 0
    for i in range(len(prompts) - 1, -1, -1):
        if not reveals(prompts[i].group("command")):
            continue
        start = prompts[i].end() + 1
        end = prompts[i + 1].start() if i + 1 < len(prompts) else len(text)
        if start < end:
            output, n = _redact_revealed(text[start:end], values)
            text, total = text[:start] + output + text[end:], total + n
    return text, total


def _redact_revealed(text: str, values: dict[str, str]) -> tuple[str, int]:
    """The output of a command that prints a secret (REVEALS): each line that is one word of six
    characters or more is the value; lines of several words (a message, a table, JSON) are left to
    the other passes, which find a value there by its name."""
    lines, n = text.split("\n"), 0
    for i, line in enumerate(lines):
        one = _ONE_WORD.match(line)
        if one and not one.group(1).startswith("[REDACTED"):
            _remember(values, one.group(1), "command_output")
            lines[i] = line.replace(one.group(1), MARK.format("command_output"))
            n += 1
    return "\n".join(lines), n


def redact(text: str) -> str:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]``."""
    return redact_count(text)[0]


def cut(text: str, limit: int, suffix: str = "…") -> str:
    """``text`` cut to about ``limit`` characters (``suffix`` included), never ending in part of a
    secret.

    Half a token ("ghp_CutAtF1v…", "Bearer Bz9Yx8Wv…") is too short for the patterns, so redacting
    after the cut would keep it. A window a little past the cut (ending on a whitespace boundary)
    is redacted first: when nothing crossing the cut is hidden, the plain cut is returned (redacted
    later with its batch, whose recurring values it then shares); else the redacted window, cut
    with its marks whole. Only the window is read: a 1 MB tool output costs what a short one does.
    """
    if len(text) <= limit:
        return text
    keep = max(limit - len(suffix), 0)
    head = text[:keep]
    # The common case, cheaply: nothing near the cut is hidden (the token across it with the key or
    # header before it, a quoted value to its closing quote), so no secret crosses it. A value
    # whose key is farther back is hidden after the cut all the same: key rules take any value.
    near = text[_token_start(text, max(keep - _NEAR_BEFORE, 0)) : _token_end(text, keep + _NEAR_AFTER)]
    if redact(near) == near:
        return head + suffix
    window = text[: _token_end(text, keep + _CUT_CONTEXT)]
    clean = redact(window)
    if clean.startswith(redact(head)):
        return head + suffix
    end = keep
    for mark in MARKS.finditer(clean):
        if mark.start() < keep < mark.end():
            end = mark.end()
            break
    return clean[:end] + suffix


def tail(text: str, limit: int, prefix: str = "…") -> str:
    """The end of ``text``, at most about ``limit`` characters, ``prefix`` first: begun at a line's
    start when one is among them, else after a whitespace (no token is halved there), empty when
    they are all one token. What comes right before it can make it a secret (a key, a "Password:"
    line, a header): the tail is redacted with _CUT_CONTEXT characters before it, and when that
    hides something the tail alone would not, the redacted lines are returned; else the plain tail
    (redacted later with its batch, as ``cut`` leaves its head)."""
    if len(text) <= limit:
        return text.strip()
    start = len(text) - limit + len(prefix)
    line = text.find("\n", start - 1)
    start = line + 1 if line != -1 else _token_end(text, start) + 1  # after the whitespace ending a token
    part = text[start:].strip()
    if not part:
        return ""
    clean = redact(text[_token_start(text, max(start - _CUT_CONTEXT, 0)) :]).rstrip()
    kept = redact(part)
    if clean.endswith(kept):
        return prefix + part
    lines = clean.splitlines()[-len(part.splitlines()) :]
    ended = "\n".join(lines).strip()
    return prefix + ended if len(ended) <= 2 * limit else ""


_CUT_CONTEXT = 200  # what the window holds past the cut: a quoted value's closing quote, a token
_NEAR_BEFORE, _NEAR_AFTER = 80, 100  # the part around the cut looked at first
_CUT_TOKEN = re.compile(r"\S{0,4096}")  # the longest token looked at whole (a JWT, a key body)
# What redaction leaves in a text: a secret's kind in brackets, or the mark of a <private> part.
MARKS = re.compile(r"\[REDACTED:[a-z_]+\]|" + re.escape(PRIVATE_MARK))


def _token_start(text: str, at: int) -> int:
    """Where the token holding position ``at`` starts (``at`` itself after whitespace)."""
    return at - _CUT_TOKEN.match(text[max(at - 4096, 0) : at][::-1]).end()


def _token_end(text: str, at: int) -> int:
    """Where the token holding position ``at`` ends (``at`` itself before whitespace): a window
    ending there halves no token."""
    return _CUT_TOKEN.match(text, at).end() if at < len(text) else len(text)


def redact_count(text: str) -> tuple[str, int]:
    """``(redacted text, number of secrets replaced)``."""
    out, count, _values = _redact(text)
    return out, count


def redact_batch(
    texts: Iterable[str],
    *,
    decoded: bool = True,
    commands: Sequence[str | None] = (),
    seen: Seen | None = None,
) -> list[str]:
    """Each text redacted; a secret value found in one text is also replaced in all the others.
    ``decoded=False`` skips the second, decoded read of text holding escapes (``_redact_decoded``),
    for a caller that reads the decoded text itself (the archive's parsed strings). ``commands``
    gives, text by text, the shell command a tool output came from (None for other texts): the
    output of a command that prints a secret is hidden line by line (``revealed``). ``seen``: the
    values found in earlier batches, hidden here too where they recur with nothing around them that
    names a secret ("connect again with Kestrel-Moon-5521"); this batch's are added to it."""
    texts = list(texts)
    results = [_redact(t, decode=decoded, command=c) for t, c in zip_longest(texts, commands[: len(texts)])]
    values = _recurring({v: k for _, _, vs in results for v, k in vs.items()})
    if seen is not None:
        earlier = seen.found_in([out for out, _, _ in results])
        seen.add(values)
        values = sorted(set(values) | earlier, key=len, reverse=True)
    return [_replace_values(out, values) for out, _, _ in results]


# A word as a recurring secret value stands in later text: between spaces, quotes, brackets, or after
# an "=" or ":" (PGPASSWORD=..., admin:...); trailing punctuation is stripped before it is looked up.
_SEEN_WORD = re.compile(r"[^\s\"'`=:,;()\[\]{}<>|]{" + str(_MIN_RECUR) + ",200}")


class Seen:
    """The secret values hidden in earlier batches, as keyed digests (HMAC-SHA256 under a random key
    of this home): no value is kept, and the digests say nothing without the key. ``path``: the file
    they are kept in (0600), its first line the key; None keeps them in memory only."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.key, self.digests = secrets.token_bytes(32), set()
        self.fresh: list[str] = []  # values added and not yet taken (take_fresh)
        try:
            lines = path.read_text(encoding="ascii").split() if path is not None and path.exists() else []
            if lines:
                self.key, self.digests = bytes.fromhex(lines[0]), set(lines[1:])
        except (OSError, ValueError):
            pass  # unreadable or damaged: start again (what is hidden by name is still hidden)

    def _digest(self, value: str) -> str:
        return hmac.new(self.key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:32]

    def add(self, values: Iterable[str]) -> None:
        """Know these values from now on; the ones not known before wait in ``fresh`` for the caller
        to hide where earlier reads stored them (a value said bare first, with its name later)."""
        by_digest = {self._digest(v): v for v in values}
        new = set(by_digest) - self.digests
        self.fresh += [by_digest[d] for d in sorted(new)]
        if new:
            self.digests |= new
            if self.path is not None:
                try:
                    tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
                    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as fh:
                        fh.write("\n".join([self.key.hex(), *sorted(self.digests)]) + "\n")
                    os.replace(tmp, self.path)
                except OSError:
                    pass  # a home that cannot be written (full disk): this process still knows them

    def take_fresh(self) -> list[str]:
        fresh, self.fresh = self.fresh, []
        return fresh

    def found_in(self, texts: Iterable[str]) -> set[str]:
        """The earlier values that recur in these texts, as the texts hold them."""
        if not self.digests:
            return set()
        found = set()
        for text in texts:
            for word in set(_SEEN_WORD.findall(text)):
                for value in {word, word.rstrip(_TRAILING)}:
                    if len(value) >= _MIN_RECUR and self._digest(value) in self.digests:
                        found.add(value)
        return found


def _redact(text: str, decode: bool = True, command: str | None = None) -> tuple[str, int, dict[str, str]]:
    """``(redacted text, number of secrets replaced, {each value hidden: its kind})``."""
    if not text:
        return text, 0, {}
    text = strip_private(text)
    values: dict[str, str] = {}
    total = 0
    if command and reveals(command):
        text, total = _redact_revealed(text, values)
    lowered, lowered_for = text.lower(), text
    # A pattern is searched first: most find nothing, and then no substitution is set up.
    for kind, pattern in _TOKEN_PATTERNS:
        if (kind not in _GATES or _open(kind, text, lowered)) and pattern.search(text):
            text, n = _substitute(text, kind, pattern, values)
            if n:
                total += n
                lowered, lowered_for = text.lower(), text
    for kind, pattern in _LIBRARY_PATTERNS:
        if (kind not in _GATES or _open(kind, text, lowered)) and pattern.search(text):
            text, n = _substitute(text, kind, pattern, values, library=True)
            total += n
    if "cookie" in lowered or "curl" in lowered:
        text, n = _redact_cookies(text, lowered, values)
        total += n
    if "authorization" in lowered or "cookie" in lowered:
        text, n = _hide(text, _header_pair_values(text), values)
        total += n
    if "</" in text:
        text, n = _redact_xml(text, values)
        total += n
    if "key" in lowered or "auth" in lowered:
        text, n = _redact_bare_keys(text, values)
        total += n
    if "**" in text or "| " in text or ":\n" in text:
        text, n = _redact_markdown(text, values)
        total += n
    if ("|" in text or "," in text or ";" in text or "\t" in text) and _names_a_column(lowered):
        if text is not lowered_for or len(lowered) != len(text):
            lowered, lowered_for = _lowered(text), text
        text, n = _hide(text, _table_values(text, lowered), values)
        total += n
    if "[REDACTED:aws_access_key]" in text or "secret access key" in lowered or "secretaccesskey" in lowered:
        text, n = _redact_aws_secrets(text, values)
        total += n
    text, n = _redact_assignments(text, values)
    total += n
    if text is not lowered_for or len(lowered) != len(text):  # a pass above changed the text
        lowered, lowered_for = _lowered(text), text
    text, n = _redact_unnamed(text, lowered, values)
    total += n
    if _PAIR_VALUE_FIELD.search(lowered):  # a value field at all (rare in prose): then the pairs
        text, n = _redact_name_value(text, values)
        total += n
    text, n = _redact_env(text, values)
    total += n
    text, n = _redact_prose(text, values)
    total += n
    if "$ " in text:  # a terminal session pasted whole: "$ gh auth token\ngho_…"
        text, n = _redact_pasted_session(text, values)
        total += n
    if decode:
        text, n = _redact_decoded(text, values)
        total += n
        text, n = _redact_base64(text, values)
        total += n
    if "[REDACTED:" in text:  # a pattern that stops short of its token's end leaves no tail behind
        text = _MARK_TAIL.sub(r"\1", text)
    if recurring := _recurring(values):
        before = text
        text = _replace_values(text, recurring)
        total += text.count("[REDACTED:") - before.count("[REDACTED:")
    return text, total, values


# Backslash escapes (a JSON string's or a repr's \n, \t, \", \\, \uXXXX) and URL encoding (%3D).
_ESCAPE = re.compile(r"\\(?:[nrt\"'\\/]|u[0-9A-Fa-f]{4})|%[0-9A-Fa-f]{2}")
_ESCAPED_CHAR = {"n": "\n", "r": "\r", "t": "\t"}


def _redact_decoded(text: str, values: dict[str, str]) -> tuple[str, int]:
    """Trigger: the text holds escapes (output of `jq -c`, a repr, a URL-encoded URL).
    Why: a token right after "\\n" or "%3D" does not start a word for the patterns, a name after
    "\\n" does not start a line ("\\nghp_...", "%3Dghp_...", "\\nDB_PASS=..."), one general
    blind spot. Outcome: the text is redacted again decoded, and each value hidden there is hidden
    where it stands in the text, escapes and all; text without escapes costs one scan."""
    view = _decoded(text)
    if view is None:
        return text, 0
    decoded, escapes = view
    _, _, hidden = _redact(decoded, decode=False)
    spans = []
    for value, kind in hidden.items():
        # A short value only as a word of its own; a long one wherever it stands ("-pS3cretPass",
        # "S3cretPass=ghp_...": a value is found in the text as redacted so far).
        pattern = rf"(?<![\w]){re.escape(value)}(?![\w])" if len(value) < 8 else re.escape(value)
        for match in re.finditer(pattern, decoded):
            spans.append((_original(escapes, match.start()), _original(escapes, match.end()), kind))
    out: list[str] = []
    done = 0
    for start, end, kind in sorted(spans, key=lambda s: (s[0], -s[1])):
        if start >= done:
            out += [text[done:start], MARK.format(kind)]
            done = end
    for value, kind in hidden.items():
        values.setdefault(value, kind)
    if not out:
        return text, 0
    out.append(text[done:])
    return "".join(out), len(out) // 2


def _redact_base64(text: str, values: dict[str, str]) -> tuple[str, int]:
    """Trigger: a run of base64 characters (B64_MIN to B64_MAX of them) that decodes to readable
    text. Why: a secret written encoded ("echo Z2hwX2Ex… | base64 -d", a token pasted from a config
    that stores it so) is noise to the patterns. Outcome: when the decoded text holds a secret, the
    encoded run is hidden whole, and both forms are this text's values (so they are known where they
    recur, and by later reads: Seen). Runs are found in one linear scan; most fail to decode, and
    at most B64_READS that decode are read (a text made of encoded prose costs what that many do)."""
    spans = []
    reads = 0
    for match in _B64_RUN.finditer(text):
        decoded = _base64_text(match.group())
        if decoded is None:
            continue
        reads += 1
        if reads > B64_READS:
            break
        _, n, hidden = _redact(decoded, decode=False)
        if n and hidden:
            spans.append((match.start(), match.end(), next(iter(hidden.values()))))
            for value, named in hidden.items():
                values.setdefault(value, named)
    return _hide(text, spans, values) if spans else (text, 0)


B64_MIN, B64_MAX = 16, 4096  # a secret's encoded length: "ghp_…" is 56, a short password 16
B64_READS = 100  # encoded runs read as text, per text
_B64_RUN = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/_-]{16,}={0,2}(?![\w+/=-])")


def _base64_text(run: str) -> str | None:
    """The text a base64 run (standard or URL-safe alphabet) encodes, when it decodes to readable
    UTF-8 of at least 8 characters; None for anything else (a path, a hash, an identifier, binary)."""
    body = run.rstrip("=")
    if not B64_MIN <= len(body) <= B64_MAX or len(body) % 4 == 1 or body.isalpha() or body.isdigit():
        return None
    urlsafe = "-" in body or "_" in body
    if urlsafe and ("+" in body or "/" in body):
        return None
    try:
        raw = base64.b64decode(
            body + "=" * (-len(body) % 4), altchars=b"-_" if urlsafe else None, validate=True
        )
        plain = raw.decode("utf-8")
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        return None
    readable = len(plain) >= 8 and all(c.isprintable() or c in "\n\t" for c in plain)
    return plain if readable else None


def _decoded(text: str) -> tuple[str, list[tuple[int, int, int]]] | None:
    """``text`` with its escapes decoded, and each escape's (place in the decoded text, start and
    end in ``text``); None when it has none."""
    if "\\" not in text and "%" not in text:
        return None
    out: list[str] = []
    escapes: list[tuple[int, int, int]] = []
    done = shift = 0
    for match in _ESCAPE.finditer(text):
        code = match.group()
        if code[0] == "%":
            char = chr(int(code[1:], 16))
        elif code[1] == "u":
            char = chr(int(code[2:], 16))
        else:
            char = _ESCAPED_CHAR.get(code[1], code[1])
        out += [text[done : match.start()], char]
        escapes.append((match.start() - shift, match.start(), match.end()))
        shift += len(code) - 1
        done = match.end()
    if not escapes:
        return None
    out.append(text[done:])
    return "".join(out), escapes


def _original(escapes: list[tuple[int, int, int]], at: int) -> int:
    """Where position ``at`` of the decoded text is in the text (``_decoded``)."""
    before = bisect.bisect_left(escapes, (at,)) - 1  # the last escape decoded before ``at``
    if before < 0:
        return at
    place, _, end = escapes[before]
    return end + at - place - 1


def hide(text: str, values: Iterable[str]) -> str:
    """``text`` with each of these secret values hidden where it stands as its own word, as a
    batch hides a value it found (for rows stored before the value was known: store.scrub_values)."""
    return _replace_values(text, sorted(set(values), key=len, reverse=True))


def _replace_values(text: str, values: list[str]) -> str:
    if len(values) > _MANY_VALUES:
        values = _occurring(text, values)
    for value in values:
        if value in text:
            text = _replace_word(text, value)
    return text


# Past this many values, which of them occur is found in one pass over the text: a test of each is a
# pass each (a dump of thousands of `KEY=value` lines would take a minute per megabyte).
_MANY_VALUES = 64


def _occurring(text: str, values: list[str]) -> list[str]:
    """The values (each at least _MIN_RECUR long) that occur in ``text``, in their order: each place
    of the text is looked up once by its first _MIN_RECUR characters."""
    by_start: dict[str, list[str]] = {}
    for value in values:
        by_start.setdefault(value[:_MIN_RECUR], []).append(value)
    found = set()
    for at in range(len(text) - _MIN_RECUR + 1):
        for value in by_start.get(text[at : at + _MIN_RECUR], ()):
            if value not in found and text.startswith(value, at):
                found.add(value)
    return [value for value in values if value in found]


def _replace_word(text: str, value: str) -> str:
    """Replace ``value`` where it stands as its own token (not inside a longer word; an escape
    just before it, "\\n" or "%3D", ends the word before)."""
    pattern = re.compile(r"(?:(?<![\w])|(?<=\\[nrt])|(?<=%[0-9A-Fa-f]{2}))" + re.escape(value) + r"(?![\w])")
    return pattern.sub(MARK.format("recurring_secret"), text)


def _remember(values: dict[str, str], secret: str, kind: str) -> None:
    """Note a hidden value and its kind: to hide where it recurs (``_recurring``), and, found in a
    decoded view of the text, where it stands in the text (``_redact_decoded``)."""
    secret = secret.strip().strip("\"'")
    if "[REDACTED" not in secret:
        if secret:
            values.setdefault(secret, kind)
        return
    # A value that holds a token hidden before it ("S3cret=[REDACTED:github_token]"): its other parts.
    for part in _MARK_OR_PART.split(secret):
        part = part.strip().strip("\"'")
        if len(part) >= 4 and any(c.isalnum() for c in part):
            values.setdefault(part, kind)


_MARK_OR_PART = re.compile(r"\[REDACTED:[a-z_]*\]?|\[private\]")


def _recurring(values: dict[str, str]) -> list[str]:
    """The values to hide wherever they recur, longest first; not an ordinary word ("production"),
    which would then be hidden all over the batch."""
    return sorted(
        (v for v in values if len(v) >= _MIN_RECUR and "\n" not in v and (_secret_like(v) or len(v) >= 16)),
        key=len,
        reverse=True,
    )


def _secret_like(value: str) -> bool:
    """A prose value worth hiding: it has a digit, a symbol or mixed case (not "wrong", "case-sensitive")."""
    core = value.rstrip(_TRAILING)
    if len(core) < 4 or core.startswith("[REDACTED"):
        return False
    if any(c.isdigit() for c in core):
        return True
    if any(not c.isalnum() and c not in "-._'" for c in core):
        return True
    if len(core) >= 15 and core.count("-") >= 2:
        return True  # a passphrase of words: "correct-horse-battery"
    return any(c.isupper() for c in core[1:]) and any(c.islower() for c in core)


def _env_assignments(text: str) -> Iterator[tuple[str, re.Match[str]]]:
    """(name, tail match) of each capitalised name holding a secret word followed by = or :."""
    for word in _ENV_WORD.finditer(text):
        start, end = word.start(), word.end()
        while start > 0 and _ENV_NAME_CHAR.match(text, start - 1):
            start -= 1
        while end < len(text) and _ENV_NAME_CHAR.match(text, end):
            end += 1
        if not text[start].isalpha() or (start and (text[start - 1].isalnum() or text[start - 1] in "_$")):
            continue
        if not _env_secret_name(text[start:end]):
            continue
        tail = _ENV_TAIL.match(text, end)
        if tail:
            yield text[start:end], tail


def _env_secret_name(name: str) -> bool:
    if name in _SHELL_NAMES:
        return False
    return any(_ENV_SECRET_PART.fullmatch(part) and part not in _NOT_PASS for part in name.split("_"))


# Words that end in PASS and name no password (BYPASS_CACHE, COMPASS_HEADING).
_NOT_PASS = frozenset("BYPASS COMPASS ENCOMPASS SURPASS TRESPASS OVERPASS UNDERPASS".split())


def _redact_env(text: str, values: dict[str, str]) -> tuple[str, int]:
    out: list[str] = []
    done = count = 0
    for key, match in _env_assignments(text):
        if match.start() < done:
            continue
        value = match.group("value")
        start, end = match.span("value")
        if value[:1] in "\"'":
            start, end, value = start + 1, end - 1, value[1:-1]
        if "[REDACTED" in value:  # a value ends where a token hidden before it starts
            value = value[: value.index("[REDACTED")]
            end = start + len(value)
        if not value.strip(" \\") or _NOT_A_SECRET.fullmatch(value):
            continue  # no value, a reference, or the escaped backslash of a line continuation
        if _THEN_ASSIGNED.match(text, end):
            continue  # a declaration's type, its value after "=": `const API_TOKEN: &str = …`
        if _settings_key(key):
            continue
        if value.isalpha() and value.islower() and len(value) < 6:
            continue  # KEY=true-ish words such as "none", "auto"
        if key == "PASS" and _not_a_password(key, value, match.group("sep")):
            continue
        _remember(values, value, _env_kind(key))
        out += [text[done:start], MARK.format(_env_kind(key))]
        done = end
        count += 1
    if not count:
        return text, 0
    out.append(text[done:])
    return "".join(out), count


_SETTING_WORDS = frozenset(
    "MIN MAX LEN LENGTH COUNT SIZE TTL EXPIRY EXPIRES TIMEOUT FILE PATH URL HOST PORT NAME ID TYPE MODE "
    "ENABLED REGION VERSION POLICY HEADER ROTATION LIMIT SOCK MODEL PROVIDER ATTEMPTS RETRIES BUDGET "
    "HASHERS HASHER VALIDATORS ENDPOINT URI METHOD BACKEND AT CHANGED UPDATED CREATED FINGERPRINT EXPIRE "
    "MINUTES SECONDS HOURS DAYS LIFETIME ISSUER AUDIENCE SCOPE SCOPES ALGORITHM PREFIX ALIAS".split()
)
_SECRET_PARTS = frozenset(
    "PASS PASSWORD PASSWD PWD PASSPHRASE SECRET SECRETS TOKEN KEY APIKEY CREDENTIAL CREDENTIALS AUTH".split()
)


_NAME_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def _name_parts(name: str) -> list[str]:
    """A name's words in capitals, split at "_", "-", "." and CamelCase humps (SharedAccessKeyName)."""
    return [part.upper() for part in _NAME_PART.findall(name)]


def _settings_key(key: str) -> bool:
    """Trigger: a secret-sounding name that configures something (PASSWORD_MIN_LENGTH, TOKEN_TTL), or a
    service's name in an ARN ("arn:aws:secretsmanager:..."). Why: its value is a number, a path or a
    name, not a credential. Outcome: left alone."""
    if key.lower() in ("secretsmanager", "secretmanager"):
        return True
    # A setting word counts after the secret's word (TOKEN_TTL, PASSWORD_MIN_LENGTH), not before it
    # (EMAIL_HOST_PASSWORD; VAULT_SECRET_ID is one)
    parts = _name_parts(key)
    secret = next((i for i, part in enumerate(parts) if part in _SECRET_PARTS), -1)
    if secret >= 0 and parts[secret + 1 : secret + 2] == ["ID"] and parts[secret] == "SECRET":
        return False  # Vault AppRole's secret_id is the credential
    return any(part in _SETTING_WORDS for part in parts[secret + 1 :])


def _env_kind(key: str) -> str:
    for word, kind in (
        ("PASS", "password"),
        ("PWD", "password"),
        ("SECRET", "secret"),
        ("TOKEN", "token"),
        ("CREDENTIAL", "credentials"),
        ("KEY", "api_key"),
        ("AUTH", "token"),
    ):
        if word in key:
            return kind
    return "secret"


def _lowered(text: str) -> str:
    """``text`` in lower case, letter for letter: offsets into it are offsets into the text."""
    lowered = text.lower()
    if len(lowered) != len(text):  # rare letters whose lowercase is longer ("İ")
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return lowered


def _prose_values(text: str) -> Iterator[tuple[int, int, str, str]]:
    """(start, end, how the value follows the word, kind) of each value that prose names a secret.

    How: "link" after "is", ":" or a quote (_secret_like), "to" after a setting verb's "to"/"as"
    (_password_shaped), "direct" right after the word (_key_shaped), "strong" right after a password
    word (_password_shaped)."""
    lowered = _lowered(text)
    for word in _PROSE_WORD.finditer(lowered):
        if word.group(0).startswith("pw") and word.start() and lowered[word.start() - 1].isalpha():
            continue  # "pw" inside a word
        kind = _prose_kind(word.group(0))
        # "cookie" only before a key-shaped value ("the session cookie 8f3e9a1b..."): "cookie: X"
        # and "cookie=X" are headers and pairs (_redact_cookies), "the cookie is chocolate" prose.
        link = _PROSE_LINK.match(lowered, word.end()) if kind != "cookie" else None
        if link and (span := _prose_value(text, link.end())):
            yield (*span, "to" if link.group("to") else "link", kind)
            continue
        direct = _PROSE_DIRECT.match(lowered, word.end())
        if direct:
            yield (*direct.span("secret"), "direct", kind)
        elif kind == "password" and (strong := _PROSE_DIRECT_PASSWORD.match(text, word.end())):
            yield (*strong.span("secret"), "strong", kind)
    yield from _foreign_prose_values(text, lowered)


# A password named in another language ("das Passwort ist X", "la contraseña es: X", "пароль: X",
# "密码是X", "パスワードは「X」"), read as the English prose is: joined by its language's "is", a colon or
# "=", up to three words between ("Passwort für den Server ist X", "mot de passe temporaire est X"); the
# value then has to be shaped like a password (_password_shaped: "Das Passwort ist Case-Sensitive",
# "密码为8-20位", "パスワードはSHA-256で" stay). An inflection may follow the word ("lösenordet är X"),
# and German compounds end with it ("Datenbankpasswort: X").
_FOREIGN_LINK = (
    r"(?:[ \t]+(?:ist|lautet|war|est|était|etait|es|era|é|è|is|jest|to|je|är|ar|er|on|adalah|là|la|это"
    r"|—|–|-)(?![^\W\d_])[ \t]*[:=：]?|[ \t]*[:=：])"
)
_FOREIGN_PASSWORD = re.compile(
    r"(?:(?:passwort|kennwort)|(?<![^\W\d_])(?:mot de passe|contraseña|contrasena|senha|palavra-passe"
    r"|wachtwoord|hasło|haslo|heslo|lösenord|losenord|adgangskode|passord|salasana|şifre|sifre|kata sandi"
    r"|mật khẩu|mat khau|пароль))[^\W\d_]{0,4}(?:[ \t]+[^\W\d_]+){0,3}?" + _FOREIGN_LINK + r"[ \t]*"
    r"|(?<![^\W\d_])password(?:[ \t]+[^\W\d_]+){0,3}?[ \t]+(?:è|é|ist|est|es|jest|är|er|adalah|là|это)"
    r"(?![^\W\d_])[ \t]*[:=：]?[ \t]*"
    r"|(?:密码|密碼|口令|パスワード|비밀번호|암호)[ \t]*(?:是|为|為|は|는|은)?[ \t]*[:：]?[ \t]*"
)
# Where _FOREIGN_PASSWORD may start: found with str.find (the pattern's alternation, tried at each of a
# megabyte's positions, took 160 ms of prose; the words' finds take 10-50 ms there, microseconds a message).
_FOREIGN_STEMS = (
    "passwort kennwort contraseña contrasena senha palavra-passe wachtwoord hasło haslo heslo lösenord "
    "losenord adgangskode passord salasana şifre sifre пароль password 密码 密碼 口令 パスワード 비밀번호 "
    "암호"
).split() + ["mot de passe", "kata sandi", "mật khẩu", "mat khau"]
_OPENING_QUOTES = "「『“«‹„\"'`"
_CLOSING = "」』”»›“\"'`,;"
_FOREIGN_VALUE_CHARS = 100


def _wide(c: str) -> bool:
    """A CJK, kana or Hangul character or full-width punctuation: a value said in such text ends at one."""
    o = ord(c)
    return 0x3000 <= o <= 0x9FFF or 0xAC00 <= o <= 0xD7AF or 0xF900 <= o <= 0xFAFF or 0xFF00 <= o <= 0xFFEF


def _foreign_prose_values(text: str, lowered: str) -> Iterator[tuple[int, int, str, str]]:
    """(start, end, "to", "password") of each value _FOREIGN_PASSWORD names; _redact_prose checks it."""
    starts = set()
    for stem in _FOREIGN_STEMS:
        at = lowered.find(stem)
        while at >= 0:
            starts.add(at)
            at = lowered.find(stem, at + 1)
    read_to = 0
    for start in sorted(starts):
        if start < read_to:
            continue  # inside a value read already ("passwort=passwort=…" is read once)
        m = _FOREIGN_PASSWORD.match(lowered, start)
        if m is None:
            continue
        at = m.end()
        if at < len(text) and text[at] in _OPENING_QUOTES:
            at += 1
            while at < len(text) and text[at] in " \t\u00a0":
                at += 1  # French spacing inside guillemets: « X »
        end, limit = at, min(len(text), at + _FOREIGN_VALUE_CHARS)
        while end < limit and not text[end].isspace() and text[end] not in _CLOSING and not _wide(text[end]):
            end += 1
        read_to = end
        if end > at:
            yield at, end, "to", "password"


def _prose_value(text: str, at: int) -> tuple[int, int] | None:
    """The span of the value prose gives at ``at``: inside its quotes (spaces and all, up to
    _QUOTED_CHARS on one line), else up to a space, quote, comma or semicolon."""
    if at < len(text) and text[at] in _QUOTES:
        close = text.find(text[at], at + 1, at + 2 + _QUOTED_CHARS)
        if close > at + 1 and "\n" not in text[at + 1 : close]:
            return at + 1, close
        at += 1
    value = _PROSE_VALUE.match(text, at)
    return value.span() if value else None


def _prose_kind(word: str) -> str:
    """The kind a prose word names, as for assignments (_KIND_OF_WORD); "pw", "pin code": a password."""
    if word == "cookie":
        return "cookie"
    return "api_key" if word.startswith("api") else _KIND_OF_WORD.get(word, "password")


def _key_shaped(value: str) -> bool:
    """Trigger: a value right after "secret"/"token"/"api key" with no "is" or ":" between.
    Why: "secret sauce", "token bucket" are prose; a generated key is long and mixes letters and
    digits many times over ("8f3e9a1b2c4d...", a UUID), which names and identifiers do not.
    Outcome: only such a value is hidden."""
    core = value.rstrip("=")
    if len(core) >= _BASE64_KEY_CHARS and _base64_key(core):
        return True
    if len(core) < 16 or sum(c.isdigit() for c in core) < 2 or sum(c.isalpha() for c in core) < 2:
        return False
    digit = [c.isdigit() for c in core if c.isalnum()]
    return sum(a != b for a, b in zip(digit, digit[1:])) >= 4


# A generated base64 key can hold almost no digits (one AWS secret key in a hundred has fewer than
# two): a long value that mixes cases over and over and holds a digit, "/" or "+" is one too.
_BASE64_KEY_CHARS = 30


def _base64_key(core: str) -> bool:
    if not any(c.isupper() for c in core) or not any(c.islower() for c in core):
        return False
    if not any(c.isdigit() or c in "/+" for c in core):
        return False
    kinds = ["u" if c.isupper() else "l" if c.islower() else "d" if c.isdigit() else "s" for c in core]
    return sum(a != b for a, b in zip(kinds, kinds[1:])) >= len(core) // 3


def _password_shaped(value: str) -> bool:
    """Trigger: a value after "to"/"as" ("set the password to Hunter2!") or right after a password
    word ("use password Hunter2! for the admin"). Why: "the token to GitHub", "convert the token to
    base64", "password sha256 hashing", "rename it to user_id2" are prose. Outcome: hidden when it is
    key-shaped, or has a digit, letters and either both cases or a symbol ("**Hashing**" is markdown),
    at least 6 long; never a file, identifier or hash name."""
    core = value.rstrip(_TRAILING)
    if (
        len(core) < 6
        or _FILE_NAME.fullmatch(core)
        or _IDENTIFIER.fullmatch(core)
        or _HASH_NAMES.fullmatch(core)
    ):
        return False
    if _key_shaped(core):
        return True
    digit = any(c.isdigit() for c in core)
    symbol = any(not (c.isalnum() or c in "-._'") for c in core)
    cases = any(c.isupper() for c in core) and any(c.islower() for c in core)
    return digit and any(c.isalpha() for c in core) and (cases or symbol)


def _passphrase(value: str) -> bool:
    """A quoted value of three or more words: what a passphrase is ("'purple monkey dishwasher'")."""
    return " " in value and len(value.split()) >= 3 and len(value) >= 12


_PROSE_CHECKS = {
    "link": _secret_like,
    "to": _password_shaped,
    "direct": _key_shaped,
    "strong": _password_shaped,
}


def _in_arn(text: str, at: int) -> bool:
    """Whether ``at`` is inside an ARN ("arn:aws:secretsmanager:…:secret:prod/db"): names, not values."""
    before = text[max(0, at - 130) : at]
    arn = before.rfind("arn:")
    return arn >= 0 and not any(c.isspace() or c in "\"',;" for c in before[arn:])


_DESCRIPTIVE = re.compile(
    r"[\w.]+-(?:formatted|encoded|based|signed|protected|only|scoped|bound|like|style|sized|length|long)",
    re.IGNORECASE,
)


def _redact_prose(text: str, values: dict[str, str]) -> tuple[str, int]:
    spans = []
    done = 0  # the end of the last value found
    for start, end, how, kind in sorted(_prose_values(text)):
        value = text[start:end]
        quoted = start and text[start - 1] in _QUOTES and end < len(text) and text[end] == text[start - 1]
        ok = _PROSE_CHECKS[how](value) or (quoted and kind == "password" and _passphrase(value))
        if start < done or not ok:
            continue
        if _PATH.match(value) or any(_NOT_A_SECRET.fullmatch(v) for v in (value, value.rstrip(_TRAILING))):
            continue
        if value.startswith("{"):
            continue  # a template's placeholder ("{{ token }}")
        if _THEN_ASSIGNED.match(text, end):
            continue  # a declaration's type, its value after "=": `let token: std::string::String = …`
        if text[start - 1 : start + 1] == "::":
            continue  # a path's separator, not a label's colon: `Secret::new(raw)`, `Token::make()`
        if _in_arn(text, start):
            continue
        if _DESCRIPTIVE.fullmatch(value.rstrip(_TRAILING)):
            continue  # "the token is JWT-formatted", "the secret is Base64-encoded": what it is like
        if not quoted:
            while end > start and text[end - 1] in _TRAILING:
                end -= 1
        spans.append((start, end, kind))
        done = end
    return _hide(text, spans, values)


def _substitute(
    text: str,
    kind: str,
    pattern: re.Pattern[str],
    values: dict[str, str] | None = None,
    library: bool = False,
) -> tuple[str, int]:
    mark = MARK.format(kind)
    lead = _LEAD.get(kind)
    out: list[str] = []
    done = 0
    word_start = kind in _WORD_START or library or pattern in _SQL_PASSWORD_CALLS
    for match in pattern.finditer(text):
        before = text[match.start() - 1] if match.start() else ""
        if lead and (not before or before not in lead):
            continue
        if word_start and before and (before.isalnum() or before == "_"):
            continue
        if before == "." and pattern in _SQL_PASSWORD_CALLS:
            continue  # a method ("builder.password('X')"): the setter's rule reads it
        if library:
            # detect-secrets patterns may include a delimiter on either side, or capture the
            # secret in group 1; redact the token itself and keep the delimiters.
            start, end = match.span(1) if pattern.groups and match.group(1) else match.span()
            while start < end and text[start] in " \t\n=:\"'":
                start += 1
            while end > start and text[end - 1] in " \t\n\"'":
                end -= 1
            if start < done or "[REDACTED" in text[start:end] or end - start < 8:
                continue
        else:
            start, end = match.span("secret") if "secret" in pattern.groupindex else match.span()
            if "[REDACTED" in text[start:end]:
                continue
        if kind in _BASIC_AUTH_KINDS and not _basic_auth(text[start:end]):
            continue
        if kind in _KEY_SHAPED_KINDS and not _key_shaped(text[start:end]):
            continue
        if pattern is _USER_PAIR and not _password_shaped(text[start:end]):
            continue
        named = kind
        if "key" in pattern.groupindex:
            key = match.group("key")
            if _settings_key(key) or _NOT_A_SECRET.fullmatch(text[start:end]):
                continue
            named = _config_kind(key)
        if values is not None:
            _remember(values, text[start:end], named)
        out.append(text[done:start])
        out.append(mark if named == kind else MARK.format(named))
        done = end
    if not out:
        return text, 0
    out.append(text[done:])
    return "".join(out), len(out) // 2


def _basic_auth(value: str) -> bool:
    """Whether ``value`` is base64 of "user:password" (printable text holding a colon)."""
    try:
        plain = base64.b64decode(value, validate=True).decode("utf-8")
    except ValueError:
        return False
    return ":" in plain and plain.isprintable()


def _config_kind(key: str) -> str:
    """The kind a tool's config key names (``aws configure set aws_session_token X``: a token)."""
    lowered = key.lower()
    if "aws_secret_access_key" in lowered:
        return "aws_secret"
    for word, kind in (("passw", "password"), ("secret", "secret"), ("key", "api_key")):
        if word in lowered:
            return kind
    return "token"


# A Cookie request header (every value), a Set-Cookie response header (its first value: the rest
# are the cookie's attributes), and the cookies given to curl -b / --cookie ("name=value; ...";
# without "=" the argument is a file).
_COOKIE_HEADER = re.compile(r"cookie2?[ \t]*:[ \t]*")  # found in the lowercased text
_CURL_COOKIE = re.compile(r"curl\b[^\n]{0,300}?\s(?:-b|--cookie)(?:[ \t]+|=)")
_NON_SPACE = re.compile(r"\S*")
_COOKIE_PAIR = re.compile(r"""[ \t]*[^=\s;,"']+[ \t]*=[ \t]*"?(?P<value>[^;\s",\\]*)"?[ \t]*(?P<more>;?)""")


def _redact_cookies(text: str, lowered: str, values: dict[str, str]) -> tuple[str, int]:
    spans = []
    if len(lowered) != len(text):  # rare letters whose lowercase is longer: offsets would not line up
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    for match in _COOKIE_HEADER.finditer(lowered) if "cookie" in lowered else ():
        start = match.start()
        set_cookie = lowered.endswith("set-", 0, start)
        before = lowered[start - (5 if set_cookie else 1) : start - (4 if set_cookie else 0)] if start else ""
        if before and (before.isalnum() or before in "_-"):
            continue  # part of a longer name ("x-cookie:", "mycookie:")
        end = text.find("\n", match.end())
        spans += _cookie_values(text, match.end(), len(text) if end < 0 else end, set_cookie)
    curl = "curl" in lowered and (" -b" in text or "--cookie" in lowered)
    for match in _CURL_COOKIE.finditer(text) if curl else ():
        start = match.end()
        quote = text[start : start + 1]
        if quote in ("'", '"'):
            end = text.find(quote, start + 1)
            spans += _cookie_values(text, start + 1, len(text) if end < 0 else end, False)
        else:
            end = _NON_SPACE.match(text, start).end()
            spans += _cookie_values(text, start, end, False)
    out: list[str] = []
    done = 0
    for start, end in sorted(spans):
        if start >= done:
            _remember(values, text[start:end], "cookie")
            out += [text[done:start], MARK.format("cookie")]
            done = end
    if not out:
        return text, 0
    out.append(text[done:])
    return "".join(out), len(out) // 2


# A header given as a name/value pair (a HAR file's "headers", a Postman collection's, a fetch call's
# header list: {"name": "Authorization", "value": "Bearer X"}, {"key": "Cookie", "value": "sid=X"}, either
# field first, YAML's `- name: Authorization` then `value: X`), or as a pair in a list (`[["Authorization",
# "Bearer X"]]`, Python's `("Cookie", "sid=X")`), and a HAR file's "cookies" list ({"name": "sid", "value":
# "X"}): the credential after the scheme, the cookies' values (a Set-Cookie's first, its attributes
# staying), each session-like cookie of the list. The value is looked for inside the pair's own object.
_HEADER_PAIR = re.compile(
    r"""["']?(?:name|key)["']?[ \t]*[:=][ \t]*"""
    r"""["']?(?P<header>(?:proxy-)?authorization|cookie|set-cookie)(?![\w-])["']?""",
    re.IGNORECASE,
)
_HEADER_TUPLE = re.compile(
    r"""[\[(][ \t]*(?P<q>["'])(?P<header>(?:proxy-)?authorization|cookie|set-cookie)(?P=q)[ \t]*,[ \t]*"""
    r"""(?P<v>["'])(?P<value>[^"'\n]*)(?P=v)""",
    re.IGNORECASE,
)
_AUTH_VALUE = re.compile(r"(?:(?P<scheme>[A-Za-z][\w-]*)[ \t]+)?(?P<credential>\S.*)")
_COOKIE_LIST = re.compile(r"""["']cookies["'][ \t]*:[ \t]*\[""", re.IGNORECASE)
_LIST_END = re.compile(r"\}[ \t\r\n]*\]|\[[ \t\r\n]*\]")
_COOKIE_LIST_REACH = 8192
_MARK_LEAD = re.compile(r"\[REDACTED:\w+\][:=]?")


def _header_value(text: str, start: int, end: int, header: str) -> list[tuple[int, int, str]]:
    """The spans to hide in the value text[start:end] of a header."""
    if header.endswith("authorization"):
        auth = _AUTH_VALUE.fullmatch(text, start, end)
        if auth is None:
            return []
        at = auth.start("credential")
        if marked := _MARK_LEAD.match(text, at, end):
            at = marked.end()  # "AWS [REDACTED:aws_access_key]:signature": the signature too
        credential = text[at:end]
        if (
            len(credential) >= 8
            and not _REFERENCE.match(credential)
            and not _NOT_A_SECRET.fullmatch(credential)
            and (auth.group("scheme") or _password_shaped(credential) or _key_shaped(credential))
        ):
            return [(at, end, "authorization")]
        return []
    return [(a, b, "cookie") for a, b in _cookie_values(text, start, end, header == "set-cookie")]


def _header_pair_values(text: str) -> list[tuple[int, int, str]]:
    """The spans to hide of every header pair and HAR cookies list (see _HEADER_PAIR)."""
    spans = []
    for pair in _HEADER_PAIR.finditer(text):
        # The pair's own object: from its "{" (or the line's start) to its "}" (or the next name field).
        opened = text.rfind("{", max(0, pair.start() - _PAIR_REACH), pair.start())
        end = text.find("}", pair.end(), pair.end() + _PAIR_REACH) if opened >= 0 else -1
        if end < 0:  # no object: YAML's list item, up to the next item's name field
            following = _PAIR_NAME.search(text, pair.end(), min(len(text), pair.end() + _PAIR_REACH))
            end = following.start() if following else min(len(text), pair.end() + _PAIR_REACH)
        found = _PAIR_VALUE.search(text, pair.end(), end)
        if found is None and opened >= 0:
            earlier = list(_PAIR_VALUE.finditer(text, opened, pair.start()))
            found = earlier[-1] if earlier else None
        if found is None:
            continue
        start, stop = found.span("value")
        if text[start : start + 1] in "\"'":
            start, stop = start + 1, stop - 1
        else:  # YAML's unquoted value runs to the line's end: `value: Bearer X` (not JSON's `null},`)
            eol = text.find("\n", start)
            line = text[start : len(text) if eol < 0 else eol].rstrip()
            if not any(c in line for c in "\"',{}[]"):
                stop = start + len(line)
        if stop > start:
            spans += _header_value(text, start, stop, pair.group("header").lower())
    for pair in _HEADER_TUPLE.finditer(text):
        spans += _header_value(text, *pair.span("value"), pair.group("header").lower())
    read_to = 0
    for listed in _COOKIE_LIST.finditer(text):
        if listed.start() < read_to:
            continue  # inside a list read already
        reach = min(len(text), listed.end() + _COOKIE_LIST_REACH)
        close = _LIST_END.search(text, listed.end() - 1, reach)
        read_to = close.end() if close else reach
        for found in _PAIR_VALUE.finditer(text, listed.end(), read_to):
            value = found.group("value")
            if value[:1] in "\"'" and _session_like(value[1:-1]) and not _REFERENCE.match(value[1:]):
                spans.append((found.start("value") + 1, found.end("value") - 1, "cookie"))
    return spans


def _cookie_values(text: str, start: int, end: int, first_only: bool) -> list[tuple[int, int]]:
    """The spans of the values worth hiding among the "name=value; ..." pairs at text[start:end]: a
    session id is long or mixes letters and digits; "theme=dark", "lang=en-US" stay."""
    spans = []
    while pair := _COOKIE_PAIR.match(text, start, end):
        if _session_like(pair.group("value")):
            spans.append(pair.span("value"))
        if first_only or not pair.group("more"):
            break
        start = pair.end()
    return spans


def _session_like(value: str) -> bool:
    """A cookie's value worth hiding: a session id is long or mixes letters and digits."""
    long = len(value) >= 12 or (
        len(value) >= 6 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
    )
    return long and "[REDACTED" not in value and not _NOT_A_SECRET.fullmatch(value)


# One piece of an LLM's streamed text: a word or two with its space and punctuation.
_HEX = re.compile(r"[0-9a-fA-F]{8,}")
_STREAM_PIECE = re.compile(
    r"\s?(?:[^\W\d_]{1,10}(?:'[^\W\d_]{1,3})?|\d{1,4}|[^\w\s]{1,4}|[^\w\s][^\W\d_]{1,10})[^\w\s]{0,2}"
)


def _redact_assignments(text: str, values: dict[str, str]) -> tuple[str, int]:
    spans = []
    done = 0  # the end of the last value found: a key word inside it is part of the value
    for word in _key_words(text):
        if word.start() < done:
            continue
        short = word.group(0) in ("pass", "pwd")
        if short and not (_SHORT_KEY_TAIL.match(text, word.end()) and _key_part(text, word.start())):
            continue  # "pass the test": a common word, so the cheap test first
        key_start, key_end = _expand_key(text, word.start(), word.end())
        if _settings_key(text[key_start:key_end]):
            continue
        value_span = _value_span(text, key_start, key_end)
        if value_span is None:
            continue
        start, end = value_span
        if short and _not_a_password(text[key_start:key_end], text[start:end], text[key_end:start]):
            continue
        kind = _kind(text[key_start:key_end], word.group(0))
        if (
            text[key_start:key_end] == "token"
            and text[start - 1 : start] in "\"'"
            and _STREAM_PIECE.fullmatch(text[start:end])
            and not _HEX.fullmatch(text[start:end])
        ):
            continue  # an LLM stream's piece of text ({"token": " Hello"}), not a credential
        spans.append((start, end, kind))
        done = end
    return _hide(text, spans, values)


# A secret's name given an expression whose string literal is the value or its fallback: a settings
# field's default (`db_password: str = Field(default="X")`), an environment read's fallback
# (`password = os.environ.get("PW", "X")`, `process.env.DB_PASSWORD || "X"`), Rust's `Some("X")`. A
# literal there is hidden when shaped like a password (_password_shaped); a variable's name
# (`"DB_PASSWORD"`), a date, a path or URL, a pattern ("[A-Za-z0-9]{40}") and words with spaces stay.
_EXPRESSION_TAIL = re.compile(r"""["']?[ \t]*(?::=|=(?![=>])|:(?!:))[ \t]*(?P<rhs>[^\n;]{1,300})""")
_LITERAL = re.compile(r"""(?P<raw>\br)?(?:"(?P<double>[^"\\\n]{6,100})"|'(?P<single>[^'\\\n]{6,100})')""")
_ENV_NAME_VALUE = re.compile(r"[A-Z][A-Z0-9_]*")
_DATE_VALUE = re.compile(r"\d{4}-\d{2}-\d{2}.*|\d{1,2}[:/.]\d{2}.*")
_PATTERN_CHARS = re.compile(r"\[[^\]]*\]|\{\d*,?\d*\}|\\[dswbDSWB]|\(\?")


def _expression_values(text: str) -> Iterator[tuple[int, int, str]]:
    """The spans of the password-shaped literals in what a secret's name is given (see _EXPRESSION_TAIL)."""
    done = 0
    for word in _key_words(text):
        if word.start() < done or word.group(0) in ("pass", "pwd"):
            continue
        key_start, key_end = _expand_key(text, word.start(), word.end())
        if _settings_key(text[key_start:key_end]):
            continue
        tail = _EXPRESSION_TAIL.match(text, key_end)
        if tail is None or tail.group("rhs")[:1] in "\"'`":
            continue  # no value, or a plain literal (_redact_assignments)
        done = tail.end()
        for literal in _LITERAL.finditer(text, tail.start("rhs"), tail.end("rhs")):
            group = "double" if literal.group("double") is not None else "single"
            value = literal.group(group)
            if (
                literal.group("raw")
                or not _lone_password(value)
                or _DATE_VALUE.match(value)
                or "://" in value
                or _PATH.match(value)
                or _PATTERN_CHARS.search(value)
            ):
                continue
            yield (*literal.span(group), _kind(text[key_start:key_end], word.group(0)))


def _lone_password(value: str) -> bool:
    """A value standing alone (a table's cell, a literal) that is a password: one word shaped like one,
    not a variable's name ("DB_PASSWORD2") nor a placeholder or call (_NOT_A_SECRET)."""
    return (
        not any(c.isspace() for c in value)
        and _password_shaped(value)
        and not _ENV_NAME_VALUE.fullmatch(value)
        and not _NOT_A_SECRET.fullmatch(value)
    )


def _hide(text: str, spans: Iterable[tuple[int, int, str]], values: dict[str, str]) -> tuple[str, int]:
    """``text`` with each (start, end, kind) span replaced by its mark, each value remembered."""
    out: list[str] = []
    done = 0  # text[:done] is in out
    for start, end, kind in sorted(set(spans)):
        if start < done:
            continue  # inside a span hidden already (two forms found one value)
        _remember(values, text[start:end], kind)
        out += [text[done:start], MARK.format(kind)]
        done = end
    if not out:
        return text, 0
    out.append(text[done:])
    return "".join(out), len(out) // 2


# A pair that names a secret in one field and gives it in another: Kubernetes' env lists ("- name:
# DB_PASSWORD" then "value: X"), ECS and `kubectl -o json` ({"name": "DB_PASSWORD", "value": "X"}),
# CloudFormation's ParameterKey/ParameterValue, SSM's Name/Value. The value is the first value field
# after the name, before the next name field (the next item of the list).
_PAIR_NAME = re.compile(
    r"""["']?(?:name|key|parameterkey|parametername)["']?[ \t]*[:=][ \t]*["']?(?P<name>[\w./\-]+)""",
    re.IGNORECASE,
)
# The name field's end, just before a secret-naming key: `name: `, `"Name": "`, `ParameterKey=`.
_PAIR_FIELD = re.compile(r"""(?:name|key|parameterkey|parametername)["']?[ \t]*[:=][ \t]*["']?[\w./\-]*$""")
_FIELD_VALUE = r"""["']?[ \t]*[:=][ \t]*(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s"',;)}\]]+)"""
_PAIR_VALUE = re.compile(r"""["']?(?:value|parametervalue)""" + _FIELD_VALUE, re.IGNORECASE)
_PAIR_VALUE_FIELD = re.compile(r"""(?:value|default)["']?[ \t]*[:=]""")
# Or the key opens an object of its own: Terraform's output ({"db_password": {"value": "X"}}) and a
# variable's block (variable "db_password" { default = "X" }).
_OBJECT_AFTER = re.compile(r"""["']?[ \t]*:?[ \t]*\{""")
_OBJECT_VALUE = re.compile(r"""["']?(?:value|default)""" + _FIELD_VALUE)
_PAIR_REACH = 300  # characters after the name where its value may be
_REFERENCE = re.compile(r"""^(?:\$|\{\{|!|arn:|\[REDACTED)""")


def _redact_name_value(text: str, values: dict[str, str]) -> tuple[str, int]:
    """Found from the secret-naming words (rare in prose), each then read as a pair's name field."""
    spans: list[tuple[int, int, str]] = []
    done = 0
    for word in _key_words(text):
        if word.start() < done:
            continue
        key_start, key_end = _expand_key(text, word.start(), word.end())
        done = key_end
        before = text[max(0, key_start - 40) : key_end].lower()
        if _settings_key(text[key_start:key_end]):
            continue
        window_end = min(len(text), key_end + _PAIR_REACH)
        if _PAIR_FIELD.search(before):
            following = _PAIR_NAME.search(text, key_end, window_end)
            found = _PAIR_VALUE.search(text, key_end, following.start() if following else window_end)
        elif opened := _OBJECT_AFTER.match(text, key_end):
            close = text.find("}", opened.end(), window_end)
            found = _OBJECT_VALUE.search(text, opened.end(), close if close >= 0 else window_end)
        else:
            continue
        if found is None:
            continue
        start, end = found.span("value")
        quoted = text[start] in "\"'" and end - start >= 2
        if quoted:
            start, end = start + 1, end - 1
        value = text[start:end]
        # an unquoted word ("value: the flow works") must look like a value
        if value and not _REFERENCE.match(value) and (quoted or _secret_like(value) or len(value) >= 8):
            spans.append((start, end, _kind(text[key_start:key_end], word.group(0))))
    return _hide(text, spans, values)


# XML: an element named for a secret (Maven's <password>X</password>, <apiKey>X</apiKey>), or one whose
# key or name attribute names it (<entry key="db.password">X</entry>); a ${reference} stays.
_XML_SECRET_NAME = (
    r"[\w.:-]*?(?:passw(?:or)?d|passphrase|secret|token(?!iz|s\b|_?count|_?limit|_?usage)|api[_-]?key"
    r"|access[_-]?key|credentials?)[\w.:-]*"
)
_XML_SECRET = re.compile(
    rf"<(?P<tag>{_XML_SECRET_NAME})(?:\s[^>]*)?>(?P<value>[^<\n$]{{1,200}})</(?P=tag)>"
    rf"|<(?P<tag2>[\w.:-]+)\s[^>]*?\b(?:key|name)\s*=\s*[\"']{_XML_SECRET_NAME}[\"'][^>]*>"
    r"(?P<value2>[^<\n$]{1,200})</(?P=tag2)>",
    re.IGNORECASE,
)


def _redact_xml(text: str, values: dict[str, str]) -> tuple[str, int]:
    spans = []
    for m in _XML_SECRET.finditer(text):
        group = "value" if m.group("value") is not None else "value2"
        name = m.group(0)[: m.start(group) - m.start()]  # the tag and its attributes
        word = _KEY_WORD_ANY_CASE.search(name)
        if m.group(group).strip() and not m.group(group).startswith("[REDACTED"):
            spans.append((*m.span(group), _kind(name, word.group(0)) if word else "password"))
    return _hide(text, spans, values)


# How a reply or a note lays a secret out in Markdown: a bold label ("**Password:** X"), a table row
# ("| DB_PASSWORD | X |"), or a label alone on its line with the value on the next ("Password:\nX").
# A secret's word in a label, spaces allowed ("API key"), a count of tokens not ("Max tokens").
_MD_KEY = re.compile(
    r"passw|passphrase|secret|token(?!s|iz|[ _]?count|[ _]?limit|[ _]?usage)|api[ _-]?key|access[ _-]?key"
)
_MD_WORD = (
    r"[\w .-]{0,30}?(?:passw(?:or)?d|passphrase|secret|token|api[ _-]?key|access[ _-]?key)[\w .-]{0,12}?"
)
_MD_LINE = re.compile(  # matched on a lowered line; the value's span is the text's
    rf"\*\*{_MD_WORD}\s*:?\s*\*\*\s*:?[ \t]*`?(?P<bold>[^\s`*|]+)"
    rf"|^[ \t]*\|[ \t]*`?{_MD_WORD}`?[ \t]*\|[ \t]*`?(?P<cell>[^\s`|]+)`?[ \t]*\|"
    rf"|^[ \t]*{_MD_WORD}[ \t]*:[ \t]*$",
    re.MULTILINE,
)
_NEXT_LINE_VALUE = re.compile(r"[ \t]*`?(?P<next>[^\s`]+)`?[ \t]*$")
_MD_KINDS = (("pass", "password"), ("secret", "secret"), ("token", "token"), ("key", "api_key"))


def _marked_lines(lowered: str) -> set[int]:
    """Where the lines holding a Markdown mark ("**", "|", a closing ":") start: few in prose."""
    starts = set()
    for mark in ("**", "|", ":\n"):
        at = lowered.find(mark)
        while at >= 0:
            starts.add(lowered.rfind("\n", 0, at) + 1)
            eol = lowered.find("\n", at + len(mark) - 1)  # ":\n" ends its own line: on from the next
            at = lowered.find(mark, eol + 1) if eol >= 0 else -1
    return starts


def _redact_markdown(text: str, values: dict[str, str]) -> tuple[str, int]:
    """Each line holding a secret's name, read as one of the three layouts (the value on the next
    line for a label alone on its line)."""
    lowered = text.lower()
    if len(lowered) != len(text):
        return text, 0
    spans = []
    for start in sorted(_marked_lines(lowered)):
        end = lowered.find("\n", start)
        end = len(text) if end < 0 else end
        if not _MD_KEY.search(lowered, start, end):
            continue
        m = _MD_LINE.search(lowered, start, end)
        if m is None:
            continue
        if m.group("bold") or m.group("cell"):
            group = "bold" if m.group("bold") else "cell"
            at = m.start(group)
            value = text[at : m.end(group)].rstrip(_TRAILING)
        else:
            nxt = text.find("\n", end + 1) if end < len(text) else -1
            line = _NEXT_LINE_VALUE.match(text, end + 1, len(text) if nxt < 0 else nxt)
            if end >= len(text) or line is None:
                continue
            at, value = line.start("next"), line.group("next").rstrip(_TRAILING)
        label = lowered[start:at]
        name = "_".join(re.findall(r"[a-z0-9]+", label))
        if not _MD_KEY.search(label) or _settings_key(name.upper()):
            continue  # "**Max tokens:** 4096", "**Token TTL:** 3600s", "**Secret name:** prod/db"
        if _secret_like(value) and not value.startswith("[REDACTED") and not _NOT_A_SECRET.fullmatch(value):
            kind = next((k for w, k in _MD_KINDS if w in label), "password")
            spans.append((at, at + len(value), kind))
    return _hide(text, spans, values)


# A table whose header names a secret's column ("| user | password |" over a "|---|---|" line, outer bars
# optional; or a CSV header "username,password,email" opening a block of lines): that column's cell in
# each row below, when shaped like a password (_password_shaped: "▁the", "2024", "--spacing-4", "GPT-4"
# in a tokenizer's or a design system's table stay) and not a variable's name; the header, the other
# cells and a row that does not fit the header stay.
# The line under a header: Markdown's "|---|:-:|", psql's "----+----", a MySQL or RST border "+---+===+".
_TABLE_RULE = re.compile(r"[ \t|+:=-]*[-=][ \t|+:=-]*\r?")
_CSV_NAME = re.compile(r"""["']?[A-Za-z][\w.\-]*(?: [\w.\-()]+){0,4}["']?""")
_CSV_SEPARATORS = (",", ";", "\t")
_CELL_BAR = re.compile(r"(?<!\\)\|")  # a cell's bar; an escaped one (`x\|y`) is the cell's text
_CSV_FIELD = re.compile(r'"(?:[^"\n]|"")*"|[^,\n]*')
_TABLE_REACH = 65536  # the rows read under one header
# A password column's name in another language; the lists below are made from it.
_FOREIGN_COLUMNS = (
    "passwort",
    "kennwort",
    "mot de passe",
    "contraseña",
    "senha",
    "wachtwoord",
    "hasło",
    "lösenord",
    "salasana",
    "пароль",
    "密码",
    "パスワード",
    "비밀번호",
)
_COLUMN_HIT = re.compile("|".join([_MD_KEY.pattern, "pwd", "pass", *_FOREIGN_COLUMNS]))
_COLUMN_LAST = frozenset(
    "password passwd pass passphrase pwd pw secret token key apikey credential credentials".split()
) | {name.split()[-1] for name in _FOREIGN_COLUMNS}
# The substring tests of _names_a_column: "pass" finds "passwort" and "mot de passe" too.
_COLUMN_WORDS = ("pass", "pwd", "secret", "token", "key") + tuple(
    w for w in _FOREIGN_COLUMNS if w.isascii() and "pass" not in w
)
_WIDE_COLUMN_WORDS = tuple(w for w in _FOREIGN_COLUMNS if not w.isascii())


def _names_a_column(lowered: str) -> bool:
    """Whether the text may hold a secret column's name (a few substring tests; the table pass reads it)."""
    return any(w in lowered for w in _COLUMN_WORDS) or (
        not lowered.isascii() and any(w in lowered for w in _WIDE_COLUMN_WORDS)
    )


def _lines_from(text: str, at: int, end: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each line from ``at`` (a line's start) up to ``end``, without its "\r"."""
    while at < end:
        eol = text.find("\n", at, end)
        eol = end if eol < 0 else eol
        yield at, eol - (text[eol - 1 : eol] == "\r")
        at = eol + 1


def _cells(text: str, start: int, end: int, sep: str) -> list[tuple[int, int]]:
    """The spans of a row's cells, each without its padding (and a Markdown row's outer bars)."""
    row = text[start:end]
    spans, at = [], start
    if sep == ",":
        for m in _CSV_FIELD.finditer(text, start, end):
            if m.start() != at:
                continue  # the empty match after a field
            spans.append(m.span())
            at = m.end() + 1
    else:
        inner = row
        if sep == "|":
            inner = row.strip()
            at = start + row.index(inner[:1]) if inner else start
            if inner.startswith("|"):
                inner, at = inner[1:], at + 1
            if inner.endswith("|") and not inner.endswith("\\|"):
                inner = inner[:-1]
        for cell in _CELL_BAR.split(inner) if sep == "|" else inner.split(sep):
            spans.append((at, at + len(cell)))
            at += len(cell) + 1
    out = []
    for a, b in spans:
        while a < b and text[a] in " \t`\"'*\ufeff":
            a += 1
        while b > a and text[b - 1] in " \t`\"'*":
            b -= 1
        out.append((a, b))
    return out


def _secret_column(name: str) -> bool:
    """A column's name says it holds secrets ("Password", "API key", "dbPassword", "DB password (prod)"):
    the secret's word ends it, so neither a setting ("Token TTL") nor a thing named after one
    ("Password manager")."""
    label = re.sub(r"\([^)]*\)", " ", name)
    words = [w.lower() for w in re.findall(r"[A-Z]?[^\W\d_A-Z]+|[A-Z]+(?![^\W\d_A-Z])|\d+", label)]
    if not words or words[-1] not in _COLUMN_LAST:
        return False
    return words[-1] != "key" or len(words) > 1 and words[-2] in ("api", "access", "secret", "private")


def _table_values(text: str, lowered: str) -> Iterator[tuple[int, int, str]]:
    """The spans of the secret columns' cells of every table whose header names one."""
    read_to = 0
    for hit in _COLUMN_HIT.finditer(lowered):
        if hit.start() < read_to:
            continue  # on a line read already: a header's or a row's
        start = lowered.rfind("\n", 0, hit.start()) + 1
        end = lowered.find("\n", hit.start())
        end = len(text) if end < 0 else end
        read_to = end
        end -= text[end - 1 : end] == "\r"
        header = text[start:end]
        if "|" in header:
            sep = "|"
            rule_end = text.find("\n", read_to + 1)
            rule_end = len(text) if rule_end < 0 else rule_end
            if read_to >= len(text) or not _TABLE_RULE.fullmatch(text, read_to + 1, rule_end):
                continue
            body = rule_end + 1
        elif (sep := max(_CSV_SEPARATORS, key=header.count)) in header and f"{sep} " not in header:
            # A header opens its block (the line before holds no separator), and prose puts a space
            # after its commas ("In short, rotate the secret"); an export does not.
            before = text[text.rfind("\n", 0, max(0, start - 1)) + 1 : max(0, start - 1)]
            if sep in before:
                continue  # a row of a block, not the header that opens it
            body = read_to + 1
        else:
            continue
        names = [text[a:b] for a, b in _cells(text, start, end, sep)]
        if len(names) < 2 or (sep == "," and not all(_CSV_NAME.fullmatch(n) for n in names)):
            continue
        columns = [i for i, n in enumerate(names) if _secret_column(n)]
        if not columns:
            continue
        for row_start, row_end in _lines_from(text, body, min(len(text), body + _TABLE_REACH)):
            if sep not in text[row_start:row_end] or not text[row_start:row_end].strip():
                break  # the table's end
            read_to = row_end
            cells = _cells(text, row_start, row_end, sep)
            if len(cells) != len(names):
                continue  # a row that does not fit (an escaped bar, a cell more): the next may
            for i in columns:
                a, b = cells[i]
                if a < b and _lone_password(text[a:b]):
                    kind = next((k for w, k in _MD_KINDS if w in names[i].lower()), "password")
                    yield a, b, kind


# A bare "key" or "auth" field whose value is shaped like a generated key ({"api": {"key": "9f86…"}},
# `auth: 3b1f…`): the name says too little alone, the value's shape says the rest.
_DIGEST = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a git commit or a sha256: public by nature
_BARE_KEY = re.compile(
    r"""(?:key|auth)["']?[ \t]*[:=][ \t]*(?P<value>"[^"\n]*"|'[^'\n]*'|[a-z0-9+/_\-]{6,}=*)"""
)
# Keys whose name says they are secret, though no other pass reads "key" alone as a secret's word.
_NAMED_KEY = re.compile(r"(?:encryption|signing|master|hmac|jwt|webhook|preshared)[_\-]?", re.IGNORECASE)


def _redact_bare_keys(text: str, values: dict[str, str]) -> tuple[str, int]:
    spans = []
    # Found in the lower-cased text (a literal's scan; "signingKey" and "JWT_KEY" too), read in the text.
    for m in _BARE_KEY.finditer(_lowered(text)):
        (start, end) = m.span("value")
        value = text[start:end]
        if value[0] in "\"'":
            value, start, end = value[1:-1], start + 1, end - 1
        before = text[m.start() - 1] if m.start() else " "
        if before.isalnum() or before in "_-.":
            # "encryption_key", "SIGNING_KEY": named secret; "api_key", "monkey": other passes or none
            name_start = m.start()
            while name_start and (text[name_start - 1].isalnum() or text[name_start - 1] in "_-"):
                name_start -= 1
            named = _NAMED_KEY.fullmatch(text[name_start : m.start()])
            if (
                named
                and value
                and (_secret_like(value) or len(value) >= 8)
                and not _NOT_A_SECRET.fullmatch(value)
            ):
                word = "auth" if m.group(0).startswith("auth") else "key"
                kind = text[name_start : m.start()].lower().rstrip("_-") + "_" + word
                spans.append((start, end, kind))  # signing_key, also of signingKey and "JWT_KEY"
            continue
        if "public" in text[max(0, m.start() - 12) : m.start()].lower():
            continue  # "public key: age1…": meant to be shared
        if _generated_key(value) and not (end < len(text) and text[end] == "."):
            spans.append((start, end, "api_key"))
    return _hide(text, spans, values)


def _generated_key(value: str) -> bool:
    """A value that a bare "key" names as a secret: shaped like a generated key, not a cache key
    ("node-cache-Linux-x64-…"), an object's name ("….png") or a commit."""
    if len(value) < 16 or any(c in value for c in "-.:") or _DIGEST.fullmatch(value):
        return False
    return _key_shaped(value)


# An AWS secret access key beside its key id or its label, with no name of its own before it: the
# `aws configure` prompt ("AWS Secret Access Key [None]: …"), a table's cell, the console's CSV.
# 40 characters of base64 with both cases (a git SHA-1 is 40 lowercase hex digits).
_AWS_SECRET = re.compile(
    r"(?<![A-Za-z0-9/+])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)


def _redact_aws_secrets(text: str, values: dict[str, str]) -> tuple[str, int]:
    found = [m.group(0) for m in _AWS_SECRET.finditer(text)]
    for value in found:
        _remember(values, value, "aws_secret")
    return _AWS_SECRET.sub(MARK.format("aws_secret"), text), len(found)


# Credentials with no secret's name before them, each known by its layout and found from a literal
# (a scan of about 1 ms per MB), its surroundings read then: a .pgpass line, Oracle's user/PASS, a
# login's "admin / PASS", a bare auth field's user:PASS, "the key is X", a wallet's seed phrase, what a
# test types into a password field.
_LINE_REACH = 300  # how far such a line is read around its literal: no farther (a long line is not one)
_PGPASS_PORT = re.compile(r":(?:\d{2,5}|\*):")
# host:port:database:user:PASS, five fields and no more (an IPv6 address, a MAC address, /etc/passwd
# have more); the host holds a letter, a dot or "*" (not a clock's 10:30:45)
_PGPASS_LINE = re.compile(
    r"[ \t]*(?=[^:\n]*[A-Za-z.*])[\w.*\-]+:(?:\d{2,5}|\*):[\w.*\-]+:[\w.@*\-]+:"
    r"(?P<secret>(?:[^\s:\\'\"]|\\.)+)[ \t]*\r?"
)
# user/PASS@host:port/service (or JDBC's host:port:SID); the password may hold "@" (the last one ends it)
_ORACLE = re.compile(
    r"/(?P<secret>[^\s/\"':]{1,128})@(?://)?[A-Za-z0-9][\w.\-]{0,128}:(?P<port>\d{2,5})[/:]\w"
)
# The user before "/": a word of its own or after JDBC's "thin:", not a path's or a URL's part.
_ORACLE_USER = re.compile(r"(?:^|[\s\"'=]|(?P<jdbc>thin:))\w+$")
_PLACEHOLDERS = frozenset(
    {"password", "passwd", "pass", "pwd", "secret", "xxx", "xxxx", "****", "<password>"}
)
_ORACLE_PORTS = frozenset({*map(str, range(1521, 1530)), "2483", "2484"})  # a listener's
# sqlplus and its tools log in with user/PASS, a connect string after "@" or none ("as sysdba"); rman
# after target, auxiliary or catalog; "connect" only before a password's shape (not "connect
# frontend/backend", "connect MySQL/MariaDB").
_ORACLE_TOOLS = ("sqlplus", "sqlldr", "expdp", "impdp", "dgmgrl", "rman", "conn")
_ORACLE_LOGIN = re.compile(
    r"(?:ect)?\b(?:[ \t]+-\w+){0,6}(?P<rman>(?:[ \t]+(?:target|auxiliary|catalog))?)[ \t(]*(?:userid=)?"
    r"[\"']?\w+/(?P<secret>[^\s\"'/(),;<>]{1,128})"
)
_LOGIN_WORDS = ("log in", "login", "sign in", "signin", "credential", "creds")
# "log in [to Grafana] [with|as|is] admin / PASS", "creds for staging: deploy/PASS", "**Login:** admin / X";
# the user is a login's (lower case: not "Google/GitHub"), the password one word (not a path's next part).
_CREDENTIAL_PAIR = re.compile(
    r"s?(?:(?:to|[ \t]+(?:to|into|for|on))(?:[ \t]+[\w.\-]+){1,3}?)?(?:[ \t]+(?:with|as|are|is|using))?"
    r"[ \t]*\**:?\**[ \t]+`?[a-z][\w.@\-]{0,64}`?[ \t]*/[ \t]*`?"
    r"(?P<secret>[^\s\"'`,;/=]{1,128})(?![^\s\"'`,;])"
)
# auth: user:PASS (basic_auth, http_auth), not a URL, a port, a timestamp or an image's tag
_AUTH_PAIR = re.compile(
    r"(?i:auth)[\"']?[ \t]*[:=][ \t]*[\"']?[A-Za-z][\w.@\-]{0,64}:"
    r"(?P<secret>[^\s\"',;/:=]{1,128})(?=[\s\"',;]|$)"
)
_SEED_WORDS = (
    "seed phrase", "seed words", "recovery phrase", "recovery words", "backup phrase", "secret phrase",
    "mnemonic",
)  # fmt: skip
# The words may follow on the next line, after "is:", a count ("(12 words)") or a call's quote.
_SEED_PHRASE = re.compile(
    r"(?![a-z])(?:[ \t]*\([^)\n]{0,20}\))?(?:[ \t]+(?:is|was|are))?[^a-z\n]{0,12}\n?[ \t]*"
    r"(?P<secret>[a-z]{3,8}(?:[ \t]+[a-z]{3,8}){11,23})(?![ \t]*[a-z])"
)
_SEED_LENGTHS = (12, 15, 18, 21, 24)  # BIP-39's phrase lengths
_SEED_MEAN_LETTERS = 4.5  # a BIP-39 phrase's words are 5.4 letters long on average; `mov push pop` 3.3
# Words of a sentence that no BIP-39 word list holds: "run the seed with fake users and then …".
_NOT_SEED_WORDS = frozenset(
    "the and with that then this from for are was have will into your you our they what when which"
    " there".split()
)
# A bare "key" in prose before a generated key's value ("the key is 9f86…", "key: 3b1f…"), not a key
# meant to be shared or a name's ("the public key is AAAA…", "the primary key is …", "cache key: …").
_KEY_IS = re.compile(
    r"(?P<link>[ \t]+(?:is|was)[ \t]+|[ \t]*[:=][ \t]*)[\"'`]?"
    r"(?P<secret>[A-Za-z0-9_+/=]{16,128}|[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})(?![\w/+=\-]|\.\w)"
)
_OPEN_KEY = re.compile(
    r"(?:public|primary|foreign|sort|partition|cache|host|composite|unique|idempotency|lookup|row|routing"
    r"|dedupe|deduplication|lock|message|object|bucket|s3|redis|busting|signing|gpg|pgp|ssh|license)[ \t]+$"
)
_UUID_SOURCE = r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
_UUID = re.compile(_UUID_SOURCE)
_UUID_TEXT = r"(?P<secret>" + _UUID_SOURCE + ")"
# A .pgpass line's port: PostgreSQL's, PgBouncer's, or any ("*"); not a Redis key's or a record's number.
_PGPASS_PORTS = frozenset({*map(str, range(5432, 5440)), "6432", "*"})


def _line_around(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The line holding text[start:end], if it is at most _LINE_REACH long on either side."""
    before = text.rfind("\n", max(0, start - _LINE_REACH), start)
    if before < 0 and start > _LINE_REACH:
        return None
    after = text.find("\n", end, end + _LINE_REACH)
    if after < 0 and len(text) > end + _LINE_REACH:
        return None
    return before + 1, len(text) if after < 0 else after


def _pgpass_line(text: str, lowered: str, port: re.Match[str]) -> re.Match[str] | None:
    """The .pgpass line around a ":5432:", alone on its line or quoted on a line that names .pgpass
    (`echo 'host:5432:db:user:X' >> ~/.pgpass`)."""
    line = _line_around(text, port.start(), port.end())
    if line is None:
        return None
    if found := _PGPASS_LINE.fullmatch(text, *line):
        return found
    if "pgpass" not in lowered[line[0] : line[1]]:
        return None
    for quote in "'\"":
        opened = text.rfind(quote, line[0], port.start())
        closed = text.find(quote, port.end(), line[1])
        if opened >= 0 and closed >= 0 and (found := _PGPASS_LINE.fullmatch(text, opened + 1, closed)):
            return found
    return None


# Secrets given to a command that stores them or logs in with them, by the command's own syntax
# (`_command_secrets`): its name (the literal found), what must follow it, where the secret stands
# (after a flag anywhere in the command, or at its place: `mc alias set NAME URL ACCESS SECRET`), and
# what must stand before the name on its line, if anything (Redis' requirepass opening its line, after
# `echo "`, redis-cli or CONFIG SET; its AUTH only after redis-cli or its prompt: "AUTH FAILED" is a log's;
# Nomad's printed "Secret ID"; such a name is found in its own case). A secret at its place ends the
# command, flags, a redirection or a closing bracket aside (`cargo login to publish` is prose; options
# are taken whole, so `mkpasswd -m sha-512` gives none). The command ends at its line's end (not one
# continued by "\"), a pipe, ";" or "&", at most _LINE_REACH characters on.
_FLAG_VALUE = r"(?:[ =]|(?=[\"']))" + _ARG  # --body X, --body=X, -b"X"
_ALONE = r"""["']?(?=[ \t]*(?:[>#)\]`"'\n]|\\\n|--?\w|/\w|$))"""
_REDIS_OPENING = r"[^\n]*?\bredis-cli\b[^\n]*?[ \t]|[ \t]*[\w.:\-]{0,64}> ?"
# at a line's start: spaces, a prompt, `echo "`, redis-cli and its flags; then CONFIG SET
_LINE_OPENING = (
    r"(?:"
    + _REDIS_OPENING
    + r"|[ \t]*(?:echo[ \t]+(?:-e[ \t]+)?[\"']?)?)(?:(?i:config)[ \t]+(?i:set)[ \t]+)?"
)
# Each command's name and what must follow it are one pattern, scanned from the name's literal (in the
# lower-cased text, or in the text for a name with capitals) when the text holds the name at all, so
# prose's many "gh" and "net" cost the regex engine's scan and no Python step.
_COMMAND_ARGUMENTS: tuple[tuple[str, re.Pattern[str], re.Pattern[str], bool, re.Pattern[str] | None], ...] = (
    tuple(
        (
            literal,
            re.compile(re.escape(literal) + after),
            re.compile(value if anywhere else value + _ALONE),
            anywhere,
            re.compile(opening) if opening else None,
        )
        for literal, after, value, anywhere, opening in (
            (
                "gh",
                r"(?:[ \t]+-\S+[ \t]+\S+)?[ \t]+secret[ \t]+set\b",
                r"\s(?:(?:-b|--body)(?:[ =]|(?=[\"']))|-b(?=[^\s\-=]))" + _ARG,  # -b X, --body=X, -bX
                True,
                "",
            ),
            ("twine", r"[ \t]+upload\b", r"\s(?:-p|--password)" + _FLAG_VALUE, True, ""),
            ("uv", r"[ \t]+publish\b", r"\s(?:-t|--token|-p|--password)" + _FLAG_VALUE, True, ""),
            ("hatch", r"[ \t]+publish\b", r"\s(?:-a|--auth)" + _FLAG_VALUE, True, ""),
            ("codecov", r"", r"\s(?:-t|--token)" + _FLAG_VALUE, True, ""),
            ("netlify", r"", r"\s--auth" + _FLAG_VALUE, True, ""),
            ("ipmitool", r"", r"\s-P[ \t]*" + _ARG, True, ""),
            ("snmp", r"[a-z]*\b", r"\s-[AXc][ \t]*" + _ARG, True, ""),  # v3's pass phrases, v2's community
            ("xfreerdp", r"", r"\s/p:" + _ARG, True, ""),
            ("jenkins-cli", r"", r"\s-auth[ \t]+[\"']?[^\s:@\"']+:" + _ARG, True, ""),
            ("lftp", r"", r"\s-u[ \t]+[\"']?[^\s,\"']+," + _ARG, True, ""),
            ("keyvault", r"[ \t]+secret[ \t]+set\b", r"\s--value" + _FLAG_VALUE, True, ""),
            (
                "put-parameter",
                r"(?=(?:[^\n]|(?<=\\)\n){0,300}?securestring)",
                r"\s--value" + _FLAG_VALUE,
                True,
                "",
            ),
            ("vault", r"[ \t]+kv[ \t]+(?:put|patch)\b", r"\s(?!-)[\w.\-]+=" + _ARG, True, ""),
            (
                "kubectl",
                r"[^\n|;&]{0,200}?\bcreate[ \t]+secret\b",
                r"--from-literal=[\"']?[^=\s\"']+=" + _ARG,
                True,
                "",
            ),
            (
                "rclone",
                r"[ \t]+config[ \t]+(?:create|update)\b",
                r"\s(?:secret_access_key|pass|password|client_secret|token|key|account_key)[ \t=]" + _ARG,
                True,
                "",
            ),
            ("net", r"[ \t]+use\b", r"\s/u(?:ser)?:\S+[ \t]+" + _ARG, True, ""),
            # net use [Z:|*] \\server\share PASSWORD /user:DOMAIN\user, the order Microsoft documents
            ("net", r"[ \t]+use\b", r"(?:[ \t]+(?:[A-Za-z]:|\*))?[ \t]+\\\\\S+[ \t]+" + _ARG, False, ""),
            ("redis-server", r"", r"\s--(?:requirepass|masterauth)[ \t]+" + _ARG, True, ""),
            (
                "mc",
                # mc, or mcli as Debian names it
                r"(?:li)?[ \t]+(?:alias[ \t]+set|config[ \t]+host[ \t]+add)\b",
                r"(?:[ \t]+(?!-)\S+){3}[ \t]+" + _ARG,
                False,
                "",
            ),
            ("cargo", r"[ \t]+login\b", r"(?:[ \t]+--registry[ =]\S+)?(?:[ \t]+--)?[ \t]+" + _ARG, False, ""),
            (
                "poetry",
                r"[ \t]+config\b",
                r"(?:[ \t]+--\S+)*[ \t]+(?:http-basic\.\S+[ \t]+\S+|pypi-token\.\S+)[ \t]+" + _ARG,
                False,
                "",
            ),
            ("wpa_passphrase", r"", r"[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\S+)[ \t]+" + _ARG, False, ""),
            ("openssl", r"[ \t]+passwd\b", r"(?:[ \t]+-salt[ \t]+\S+|[ \t]+-\w+)*+[ \t]+" + _ARG, False, ""),
            (
                "mkpasswd",
                r"",
                r"(?:[ \t]+(?:-[mSR]|--method|--salt|--rounds)(?:=|[ \t]+)\S+|[ \t]+-\w+)*+[ \t]+" + _ARG,
                False,
                "",
            ),
            ("requirepass", r"", r"[ \t]+" + _ARG, False, _LINE_OPENING),
            ("masterauth", r"", r"[ \t]+" + _ARG, False, _LINE_OPENING),
            ("auth", r"(?=[ \t])", r"(?:[ \t]+[\w.\-]+)?[ \t]+" + _ARG, False, _REDIS_OPENING),  # AUTH, auth
            ("Secret ID", r"", r"[ \t]*[:=][ \t]*" + _UUID_TEXT, False, r"[ \t]*"),  # Nomad's bootstrap token
        )
    )
)
_HERE_STRING = re.compile(r"[ \t]*" + _ARG)  # `gh auth login --with-token <<< X`
_HERE_DOC = re.compile(r"<<-?[ \t]*(?P<q>[\"']?)(?P<tag>[A-Za-z_]\w*)(?P=q)")  # <<EOF, <<'EOF', <<-"END"
_HERE_DOC_REACH = 4096
_HERE_DOC_BODY = re.compile(r"\n(?P<secret>[^\x00]*)")  # its lines, after the line that opens it
# A value piped into a command that stores it as a secret or logs in with it: echo PASS | docker login
# --password-stdin, printf '%s' X | gh secret set NAME (and wrangler secret put, docker secret create,
# gcloud secrets create, vercel env add, passwd --stdin, chpasswd, gh auth login --with-token).
_PIPING = (("echo", re.compile(r"echo\b")), ("printf", re.compile(r"printf\b")))
# The password a hashing or checking call is given (`bcrypt.hashpw(b'X', …)`, Laravel's `bcrypt('X')` and
# `Hash::make('X')`, `generate_password_hash('X')`), the value Rust's secrecy wraps
# (`SecretString::from("X")`), and the third string of Django's create_superuser / create_user (username,
# email, password; one word); looked for only in a text holding a call's quoted argument.
_SECRET_CALL = re.compile(
    r"(?:(?:hashpw|hashSync|generate_password_hash|make_password|password_hash"
    r"|Hash::make|Password\.create|bcrypt|bcrypt\.hash|argon2\.hash"
    r"|Secret(?:String|Box)?::(?:new|from))\(\s*b?(?P<q>[\"'`])(?P<secret>[^\"'`\n]+)(?P=q)"
    r"|create_(?:super)?user\(\s*(?P<q0>[\"'])[^\"'\n]*(?P=q0)\s*,\s*(?P<q2>[\"'])(?:[^\"'\n@]*@[^\"'\n]*)?(?P=q2)"
    r"\s*,\s*(?P<q1>[\"'])"
    r"(?P<word>[^\"'\s]+)(?P=q1))"
)
# A password, signing secret or key given by position to a call that logs in, connects, signs or keys a
# MAC, as a string: `smtp.login(user, 'X')`, `DriverManager.getConnection(url, user, "X")`, `new PDO(dsn,
# user, 'X')`, `jwt.sign({ id }, 'X', …)`, `hmac.new(b'X', …)`, `crypto.createHmac('sha256', 'X')`,
# `new NetworkCredential(user, "X")`, `conn.simple_bind_s(dn, 'X')`, reqwest's `.basic_auth(u, Some("X"))`;
# each looked for only where its literal stands (in the lower-cased text).
# one argument: a string, an object literal, or a plain one
_ONE_ARGUMENT = r"""(?:"[^"\n]{0,200}"|'[^'\n]{0,200}'|\{[^{}\n]{0,200}\}|[^,(){}\n]{1,200}?)"""
_QUOTED = r"""b?(?P<q>["'`])(?P<secret>[^"'`\n]+)(?P=q)"""
_POSITIONAL_SECRETS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (literal, re.compile(pattern))
    for literal, pattern in (
        ("login(", r"\.login\(\s*" + _ONE_ARGUMENT + r",\s*" + _QUOTED + r"\s*[,)]"),
        (
            "getconnection(",
            r"getConnection\(\s*" + _ONE_ARGUMENT + r",\s*" + _ONE_ARGUMENT + r",\s*" + _QUOTED,
        ),
        ("pdo(", r"new\s+PDO\(\s*" + _ONE_ARGUMENT + r",\s*" + _ONE_ARGUMENT + r",\s*" + _QUOTED),
        (
            "mysqli",
            r"(?:new\s+mysqli|mysqli_connect)\(\s*"
            + _ONE_ARGUMENT
            + r",\s*"
            + _ONE_ARGUMENT
            + r",\s*"
            + _QUOTED,
        ),
        (
            "jwt",
            r"(?:jwt|JWT|jsonwebtoken|jose)\.(?:sign|encode|verify|decode)\(\s*"
            + _ONE_ARGUMENT
            + r",\s*"
            + _QUOTED,
        ),
        ("hmac", r"(?:hmac\.new|Hmac<\w+>::new_from_slice)\(\s*" + _QUOTED),
        ("createhmac(", r"createHmac\(\s*[\"'][\w-]+[\"']\s*,\s*" + _QUOTED),
        (
            "credential",
            r"(?:NetworkCredential|UsernamePasswordCredentials|BasicAWSCredentials)\(\s*"
            + _ONE_ARGUMENT
            + r",\s*"
            + _QUOTED,
        ),
        ("passwordauthentication(", r"PasswordAuthentication\(\s*" + _ONE_ARGUMENT + r",\s*" + _QUOTED),
        ("bind", r"(?:simple_bind_s|simple_bind|bind_s)\(\s*" + _ONE_ARGUMENT + r",\s*" + _QUOTED),
        ("basic_auth(", r"\.basic_auth\(\s*" + _ONE_ARGUMENT + r",\s*Some\(\s*" + _QUOTED),
    )
)
_PIPED = re.compile(
    r"(?:[ \t]+-[neE]{1,3})*(?:[ \t]+--)?(?:[ \t]+(?P<f>[\"'])%s(?:\\n)?(?P=f))?[ \t]+"
    + _ARG
    + r"[\"']?[ \t]*\|[^\n|;&]{0,200}?"
    + _STDIN_SINK
)
_HERE_STRING_SINK = re.compile(_STDIN_SINK)
_COMMAND_END = re.compile(r"(?<!\\)\n|[|;&]")
_OPENER = {")": "(", "]": "["}
# Commands whose every value is stored (`vault kv put PATH ttl=30m db=X`, `kubectl create secret
# --from-literal=host=db.internal`): a value under a name that says nothing is hidden when it is shaped
# like a password; one under a secret's name is hidden by the key rules whatever it is.
_SHAPED_ONLY = frozenset({"vault", "kubectl"})
# Words that stand for a secret in a command's documentation, not one (`gh secret set NAME -b value`,
# `YOUR_API_TOKEN`), SNMP's example communities, a file (`@cert.pem`, `file://pw.txt`), a URL with no
# credentials (`echo https://api.example.com | vercel env add API_URL`), a command's output (`` `cat f` ``).
_COMMAND_PLACEHOLDER = re.compile(
    r"(?i:value|secret|token|password|pass|passphrase|key|api_?key|public|private|anonymous@?|guest)|[a-z]{1,3}"
    r"|[A-Z]+(?:_[A-Z]+)+|@\S+|(?:file|fileb)://\S*|https?://[^\s@]*|`.*|\\.*"
)


def _command_secrets(text: str, lowered: str) -> Iterator[tuple[int, int, str]]:
    """The spans of secrets given to the commands of _COMMAND_ARGUMENTS, and piped or after `<<<` to a
    command that reads one on its input; a placeholder (`<token>`, `$TOKEN`, `*`, `YOUR_TOKEN`) is none.
    A command's extent is read once: a name found again inside it (a run of "snmp -c snmp -c …") is not
    read again."""
    found: list[tuple[re.Match[str] | None, bool]] = []  # (match, whether only a password's shape counts)
    for literal, head_pattern, value, anywhere, opening in _COMMAND_ARGUMENTS:
        haystack = lowered if opening is None or literal.islower() else text
        if literal not in haystack:  # a substring test: far cheaper than setting up a scan on a short text
            continue
        read_to = 0
        for head in head_pattern.finditer(haystack):
            at = head.start()
            if at < read_to or _inside_name(lowered, at):
                continue  # inside a command read already, or inside a word or a name: "through", "sub-net"
            if opening and not opening.fullmatch(text, _line_start(text, at), at):
                continue
            stop = _command_end(text, head.end())
            if anywhere:
                found += ((m, literal in _SHAPED_ONLY) for m in value.finditer(text, head.end(), stop))
                read_to = stop
            else:
                found.append((value.match(text, head.end(), stop), False))
    if "|" in text:
        for name, command in _PIPING:
            if name not in lowered:
                continue
            for head in command.finditer(lowered):
                at = head.start()
                if not _inside_name(lowered, at):
                    found.append((_PIPED.match(text, head.end(), head.end() + _LINE_REACH), False))
    if "('" in text or '("' in text or "(b'" in text or '(b"' in text or "(`" in text:
        found += ((m, False) for m in _SECRET_CALL.finditer(text))
    for literal, pattern in _POSITIONAL_SECRETS:
        if literal in lowered:
            found += ((m, False) for m in pattern.finditer(text))
    # After "<<<", when the command it is given to reads a secret: the command starts after the last
    # line end, pipe, ";" or "&" before it; a sink found in it holds for each "<<<" of the same command.
    at, searched, sink_at = text.find("<<<"), 0, -1
    while at >= 0:
        # only the text since the last "<<<" is read for a separator and a sink: linear in all
        if (separator := max(text.rfind(c, searched, at) for c in "\n|;&")) >= 0:
            searched, sink_at = separator + 1, -1  # a new command
        if sink_at < 0 and (sink := _HERE_STRING_SINK.search(text, searched, at)):
            sink_at = sink.start()
        searched = at
        if sink_at >= 0:
            found.append((_HERE_STRING.match(text, at + 3, _command_end(text, at + 3)), False))
        at = text.find("<<<", at + 3)
    # A here-document's lines when its line hands them to such a command (`gh secret set NAME <<'EOF'`,
    # `cat <<EOF | wrangler secret put KEY`): from the line after "<<TAG" to the line holding only TAG,
    # at most _HERE_DOC_REACH characters on (no end within it: none).
    at = text.find("<<")
    while at >= 0:
        doc = _HERE_DOC.match(text, at) if not at or text[at - 1] != "<" else None
        line_end = text.find("\n", at, at + _LINE_REACH) if doc else -1
        if line_end >= 0 and _HERE_STRING_SINK.search(text, _line_start(text, at), line_end):
            tag = re.escape(doc.group("tag"))
            close = re.compile(r"\n[ \t]*" + tag + r"[ \t]*(?=\n|$)").search(
                text, line_end, line_end + _HERE_DOC_REACH
            )
            if close and close.start() > line_end + 1:
                found.append((_HERE_DOC_BODY.match(text, line_end, close.start()), False))
        at = text.find("<<", at + 2)
    for m, shaped in found:
        if not m:
            continue
        group = "word" if "word" in m.groupdict() and m.group("word") else "secret"
        start, end = m.span(group)
        if (tick := text.find("`", start, end)) > start:
            end = tick  # inline code closes: "Run `cargo login X`." (a value opening with one is none)
        # A bracket the command is inside closes after it ("[tool Bash: … requirepass X]").
        while (
            end > start
            and text[end - 1] in ")]"
            and text.count(text[end - 1], start, end) > text.count(_OPENER[text[end - 1]], start, end)
        ):
            end -= 1
        value = text[start:end]
        if (
            value
            and "[REDACTED:" not in value  # hidden by a pass before
            and not _NOT_A_SECRET.fullmatch(value)
            and not _COMMAND_PLACEHOLDER.fullmatch(value)
            and (not shaped or _password_shaped(value))
        ):
            yield start, end, "password"


def _inside_name(lowered: str, at: int) -> bool:
    """Whether a command's name found at ``at`` is the end of a longer word or name ("through", "sub-net",
    "my.gh"), not the command."""
    return at > 0 and (lowered[at - 1].isalnum() or lowered[at - 1] in "_-.")


def _line_start(text: str, at: int) -> int:
    """Where the line holding ``at`` starts, at most _LINE_REACH characters back."""
    return text.rfind("\n", max(0, at - _LINE_REACH), at) + 1 or max(0, at - _LINE_REACH)


def _command_end(text: str, at: int) -> int:
    """Where the command going on at ``at`` ends: its line's end, a pipe, ";" or "&", at most
    _LINE_REACH characters on."""
    m = _COMMAND_END.search(text, at, at + _LINE_REACH)
    return m.start() if m else min(len(text), at + _LINE_REACH)


# A Kubernetes Secret's values, whatever their names (`kubectl get secret -o yaml` or `-o json`, a
# manifest): every value under `data:` (base64 of the secret) and each password- or key-shaped one under
# `stringData:`, in a document whose kind is Secret (a ConfigMap's data stay).
_K8S_SECRET_KIND = re.compile(r"""^[ \t]*kind:[ \t]*["']?Secret["']?[ \t]*$|"kind":[ \t]*"Secret\"""", re.M)
_K8S_DATA = re.compile(r"^(?P<indent>[ \t]*)(?P<field>data|stringData):[ \t]*\r?$", re.M)
_K8S_ENTRY = re.compile(
    r"""(?P<indent>[ \t]*)[\w.\-]+:[ \t]*["']?(?P<value>[^\s"'|>][^\s"']*)["']?[ \t]*\r?$"""
)
_K8S_JSON_DATA = re.compile(r'"(?P<field>data|stringData)":[ \t]*\{(?P<body>[^{}]{0,20000})\}')
_K8S_JSON_ENTRY = re.compile(r'"[\w.\-]+":[ \t]*"(?P<value>[^"\\\n]+)"')
_K8S_REACH = 20_000  # how far a Secret's document is read either side of its kind


def _kubernetes_secret_values(text: str) -> Iterator[tuple[int, int, str]]:
    """The spans of a Kubernetes Secret's values (see _K8S_SECRET_KIND)."""
    read_to = 0
    for kind in _K8S_SECRET_KIND.finditer(text):
        if kind.start() < read_to:
            continue  # in a document read already
        start = max(read_to, text.rfind("\n---", max(0, kind.start() - _K8S_REACH), kind.start()) + 1)
        end = text.find("\n---", kind.end(), kind.end() + _K8S_REACH)
        end = read_to = min(len(text), kind.end() + _K8S_REACH) if end < 0 else end
        for block in _K8S_JSON_DATA.finditer(text, start, end):
            for entry in _K8S_JSON_ENTRY.finditer(text, block.start("body"), block.end("body")):
                if _stored_secret(entry.group("value"), shaped=block.group("field") != "data"):
                    yield (*entry.span("value"), "secret")
        for block in _K8S_DATA.finditer(text, start, end):
            yield from _block_values(text, block, end, shaped=block.group("field") != "data")


def _block_values(text: str, block: re.Match[str], end: int, shaped: bool) -> Iterator[tuple[int, int, str]]:
    """The spans of the `name: value` lines indented under ``block`` (a `name:` line), up to the first
    line at its indent or less; with ``shaped``, only values shaped like a password or a key."""
    at = block.end() + 1
    while at < end:
        line_end = text.find("\n", at, end)
        line_end = end if line_end < 0 else line_end
        if text[at:line_end].strip():
            if len(text[at:line_end]) - len(text[at:line_end].lstrip(" \t")) <= len(block.group("indent")):
                return  # the block's end
            entry = _K8S_ENTRY.fullmatch(text, at, line_end)
            if entry and _stored_secret(entry.group("value"), shaped):
                yield (*entry.span("value"), "secret")
        at = line_end + 1


# A map whose name says its values are secrets (`secrets:`, `credentials:`, `passwords:`, `tokens:`
# opening a block): its values shaped like a password or a key, whatever their names (`github: X`).
_SECRET_MAP = re.compile(
    r"^(?P<indent>[ \t]*)(?P<field>(?i:secrets|credentials|passwords|tokens|api_?keys)):[ \t]*\r?$", re.M
)
_SECRET_MAP_REACH = 4096


def _secret_map_values(text: str) -> Iterator[tuple[int, int, str]]:
    for block in _SECRET_MAP.finditer(text):
        yield from _block_values(text, block, min(len(text), block.end() + _SECRET_MAP_REACH), shaped=True)


def _stored_secret(value: str, shaped: bool) -> bool:
    """Whether a value a Secret or a secrets map holds is hidden: any not hidden already, or with ``shaped``
    only one shaped like a password or a key."""
    return not value.startswith("[REDACTED") and (not shaped or _password_shaped(value) or _key_shaped(value))


def _redact_unnamed(text: str, lowered: str, values: dict[str, str]) -> tuple[str, int]:
    spans = []
    spans += _command_secrets(text, lowered)
    spans += _expression_values(text)
    if "Secret" in text:
        spans += _kubernetes_secret_values(text)
    if ":" in text and any(
        word in lowered for word in ("secrets", "credentials", "passwords", "tokens", "keys")
    ):
        spans += _secret_map_values(text)
    for port in _PGPASS_PORT.finditer(text):
        if port.group(0)[1:-1] not in _PGPASS_PORTS:
            continue
        line = _pgpass_line(text, lowered, port)
        if (
            line
            and not _NAME_LIKE.fullmatch(line.group("secret"))
            and not _SLUG.fullmatch(line.group("secret"))
        ):
            spans.append((*line.span("secret"), "password"))
    if "@" in text:
        for m in _ORACLE.finditer(text):
            before = text[max(0, m.start() - 200) : m.start()]
            user = _ORACLE_USER.search(before[before.rfind("\n") + 1 :])
            # a listener's port, JDBC's "thin:", or a password's shape: not `curl svc/api@10.0.0.5:8080/`
            if user and (
                user.group("jdbc") or m.group("port") in _ORACLE_PORTS or _password_shaped(m.group("secret"))
            ):
                spans.append((*m.span("secret"), "password"))
    for tool in _ORACLE_TOOLS:
        at = lowered.find(tool)
        while at >= 0:
            m = (
                _ORACLE_LOGIN.match(lowered, at + len(tool))
                if not at or not lowered[at - 1].isalnum()
                else None
            )
            if m and (tool != "rman" or m.group("rman")):
                start, end = m.span("secret")
                if "@" in lowered[start:end]:
                    end = lowered.rindex("@", start, end)  # user/PASS@ORCL: the connect string stays
                if (
                    end > start
                    and lowered[start:end] not in _PLACEHOLDERS
                    and (tool != "conn" or _password_shaped(text[start:end]))
                ):
                    spans.append((start, end, "password"))
            at = lowered.find(tool, at + len(tool))
    forms = (
        (_LOGIN_WORDS, _CREDENTIAL_PAIR),
        (_SEED_WORDS, _SEED_PHRASE),
        (("auth",), _AUTH_PAIR),
        (("key",), _KEY_IS),
    )
    if "password" in lowered:
        spans += [(*span, "password") for span in _typed_fields(text, lowered)]
    for words, pattern in forms:
        for word in words:
            at = lowered.find(word)
            while at >= 0:
                if at and (lowered[at - 1].isalnum() or lowered[at - 1] in "/.") and word != "mnemonic":
                    pass  # inside a word or a path: "oauth", "monkey", "/auth:" ("fromMnemonic(" names one)
                elif m := pattern.match(text, at if pattern is _AUTH_PAIR else at + len(word)):
                    secret = m.group("secret")
                    if pattern is _SEED_PHRASE:
                        said = secret.split()
                        if (
                            len(said) in _SEED_LENGTHS
                            and not _NOT_SEED_WORDS.intersection(said)
                            and sum(map(len, said)) >= _SEED_MEAN_LETTERS * len(said)
                        ):
                            spans.append((*m.span("secret"), "seed_phrase"))
                    elif pattern is _KEY_IS:
                        named = lowered[at - 1 : at] in ("-", "_")  # a header's or a field's: Idempotency-Key
                        if (
                            not named
                            and _prose_key(secret, m.group("link"))
                            and not _OPEN_KEY.search(lowered, max(0, at - 24), at)
                        ):
                            spans.append((*m.span("secret"), "api_key"))
                    elif _password_shaped(secret):  # "Google/GitHub", "jwt:HS256", "admin / admin" stay
                        spans.append((*m.span("secret"), "password"))
                at = lowered.find(word, at + len(word))
    return _hide(text, spans, values)


# What a test types into a password field, found by any selector, label or placeholder that says
# "password": Playwright's `page.fill('input[name="password"]', X)` and `getByLabel('Password').fill(X)`,
# Cypress' `cy.get('#password').clear().type(X)`, Selenium's `By.id("password")).sendKeys(X)`,
# WebdriverIO's `addValue`, jQuery's `.val(X)`, Capybara's `fill_in 'Password', with: X`.
_FIELD_REACH = 80  # the selector's length either side of "password"
_TYPE_CALL = r"(?:fill|type|send_?keys|set_?value|press_?sequentially|add_?value|val)"
# ... given to the call that types, or to a call inside it (`user.type(screen.getByLabelText("Password"), X)`)
_TYPED_AS_ARGUMENT = re.compile(
    r"(?<!\w)(?i:" + _TYPE_CALL + r"[ \t]*\(|fill_in[ \t]*\(?)(?:\s*[\w.]+\()?\s*$"
)
_TYPED_AFTER = re.compile(
    r"""(?:[ \t]*\))?\s*,\s*(?:with:[ \t]*)?(?P<q>["'])(?P<secret>[^"'\n]+)(?P=q)"""
    r"""|(?:[ \t]*\)){1,2}(?:\.\w{1,40}\([^()\n]{0,40}\)){0,4}\.[ \t]*(?i:""" + _TYPE_CALL + r""")\([ \t]*"""
    r"""(?P<q2>["'])(?P<typed>[^"'\n]+)(?P=q2)"""
)


def _typed_fields(text: str, lowered: str) -> Iterator[tuple[int, int]]:
    """The spans of what is typed into a field whose quoted selector says "password"."""
    at = lowered.find("password")
    while at >= 0:
        for quote in "'\"":
            opened = text.rfind(quote, max(0, at - _FIELD_REACH), at)
            closed = text.find(quote, at, at + _FIELD_REACH)
            if opened < 0 or closed < 0 or "\n" in text[opened:closed]:
                continue
            typed = _TYPED_AFTER.match(text, closed + 1)
            if typed is None:
                continue
            as_argument = typed.group("secret") is not None
            if as_argument and not _TYPED_AS_ARGUMENT.search(text, max(0, opened - 60), opened):
                continue  # "password", "X" not given to a call that types: another rule's pair
            span = typed.span("secret" if as_argument else "typed")
            if text[span[0]] != "{":  # Cypress's special keys ("{enter}")
                yield span
            break
        at = lowered.find("password", at + len("password"))


def _prose_key(value: str, link: str) -> bool:
    """A value "the key is" names: shaped like a generated key, a UUID, or after "is" a hex digest's
    length too (`openssl rand -hex 32`); after ":" a digest stays, as a bare key field's does."""
    if "is" in link or "was" in link:
        if _UUID.fullmatch(value):
            return True  # "the key is 3f9c2a1e-…" (after ":" or "=" a UUID is an id in a log line)
        return _key_shaped(value) and not any(c in value for c in "-.:")
    return _generated_key(value)


def _key_part(text: str, start: int) -> bool:
    """Trigger: "pass" or "pwd" inside a longer key. Why: "db_pass", "dbPass" and "DB-PASS" name a
    password; "bypass", "compass" and "BYPASS" do not. Outcome: the word must start the key or a
    part of it (after _ - . or a camelCase hump)."""
    before = text[start - 1] if start else ""
    return not before.isalpha() or (before.islower() and text[start].isupper())


_SHORT_KEY_TAIL = re.compile(r"""["']?[ \t]*[:=]""")
# What a test runner prints beside "pass": a count ("pass: 5", "PASS=3") or a result word.
_RESULT_WORDS = frozenset("ok yes no passed failed skipped pass fail true false none".split())


def _not_a_password(key: str, value: str, between: str) -> bool:
    """Trigger: the value of a "pass" or "pwd" key. Why: "pass" and "PASS" are also a test runner's
    counts and results ("pass: 5", "--- PASS: TestLogin"), and "pwd" a folder. Outcome: those stay."""
    value = value.strip("\"'")
    if value.isdigit() or value.lower() in _RESULT_WORDS or _PATH.match(value):
        return True
    return key == "PASS" and ":" in between


def _key_words(text: str) -> Iterator[re.Match[str]]:
    lowered = _lowered(text)  # offsets in it are the text's, whatever letters lowercase to
    words = _KEY_WORD.finditer(lowered)
    keys = _KEY_LITERAL.finditer(lowered) if "key" in lowered or "salt" in lowered else ()
    owned = []
    for key in keys:
        if not key.start() or not (lowered[key.start() - 1].isalpha() or lowered[key.start() - 1] in "_-"):
            continue  # "key" alone, not the end of "app_key", "nonceKey"
        for start in range(max(0, key.start() - _KEY_OWNER_REACH), key.start()):
            owner = _KEY_OWNER.match(lowered, start, key.end())
            if owner and owner.end() == key.end():
                owned.append(owner)
                break
    return heapq.merge(words, owned, key=re.Match.start) if owned else words


def _expand_key(text: str, start: int, end: int) -> tuple[int, int]:
    while start > 0 and _KEY_CHAR.match(text, start - 1):
        start -= 1
    while end < len(text) and _KEY_CHAR.match(text, end):
        end += 1
    return start, end


def _value_span(text: str, key_start: int, key_end: int) -> tuple[int, int] | None:
    """Where the secret value of the key at text[key_start:key_end] lies, or None if no value."""
    key = text[key_start:key_end]
    if _in_arn(text, key_start):
        return None  # an ARN's resource type ("arn:aws:secretsmanager:…:secret:prod/db"): a name
    if key.startswith("--"):
        match = _FLAG_TAIL.match(text, key_end)
    else:
        typed = _TYPED.match(text, key_end)  # `API_KEY: str = "X"`: the value is after "=", not the type
        match = _ASSIGN_TAIL.match(text, typed.end() if typed else key_end)
        close = match.group("close") if match else ""
        quote = key_start - 1  # where the key's opening quote would be
        if close and text[quote : quote + 1] != close:
            return None  # a quote after the key that did not open before it: not a quoted key
        if match and match.group("arg") is not None:
            return _argument_value(text, key, quote, match)
    if not match:
        return None
    if (
        match.group("sep") in (" :", "\t:")
        and _NAME.fullmatch(key)
        and _SYMBOL.fullmatch(match.group("value"))
    ):
        return None  # a Ruby symbol after a name (`f.password_field :password`), not a key and its value
    value = match.group("value")
    start, end = match.span("value")
    if (
        value[0] not in "\"'"
        and end < len(text)
        and text[end] in ",;"
        and _ENV_NAME.fullmatch(key)
        and match.group("sep").strip() == "="
    ):
        # DB_PASSWORD=aB3x;9Q,z: an env line's value runs to the next space, symbols and all
        end = _TO_SPACE.match(text, end).end()
        value = text[start:end]
    if key_start and text[key_start - 1] in "?&" and "&" in value:  # a query string's next parameter
        value = value[: value.index("&")]
        end = start + len(value)
        if not value:
            return None
    if _BLOCK_SCALAR.fullmatch(value) and (block := _block_lines(text, key_start, end)):
        return block  # "password: |" then the value on the lines under it
    if end < len(text) and text[end] in ")]" and ("(" in value or "[" in value):
        # "yourStrong(!)Password", "Summer[2024]": the bracket closes one the value opened
        end = _TOKEN_REST.match(text, end).end()
        value = text[start:end]
    if value[0] in "\"'":
        start, end, value = start + 1, end - 1, value[1:-1]
        if not value.strip() or _TEMPLATE.fullmatch(value.strip()):
            return None  # empty, or a template filled in later ("{{ vault_db_password }}", "${DB_PASSWORD}")
        if _RULES.fullmatch(value):
            return None  # a form's validation rules (Laravel's 'password' => 'required|string|min:8')
        if _VERSION.fullmatch(value):
            return None
    elif _KEYWORD_CALL.match(value):
        return None  # a call given a keyword argument, key-shaped or not: `models.CharField(max_length=40`
    elif (_NOT_A_SECRET.fullmatch(value) and not _key_shaped(value)) or _looks_like_prose(
        key, match, text, key_start
    ):
        return None
    if _FILE_KEY.search(key) and _LOCATION.fullmatch(value):
        return None  # "token.js:42:13": a file's line and column in a trace, not a key's value
    if key.lower() == "credentials" and value in ("same-origin", "include", "omit"):
        return None  # fetch's option
    if "[REDACTED:" in value:  # a value ends where a token hidden before it starts
        value = value[: value.index("[REDACTED:")]
        end = start + len(value)
    return (start, end) if value.strip(" \\") else None  # an escaped line continuation is no value


# A setter of a secret, or a builder's method named for one: setPassword, set_db_password, withToken,
# password (not getToken, check_password).
_SETTER = re.compile(
    r"(?:(?:set|with)_?(?:\w*?[_a-z])?)?"
    r"(?:pass(?:word|wd|phrase)|secret|token|(?:api|access|private|auth|app|client|consumer|licen[cs]e)_?key)"
)
# More string arguments after the first: a setter's secret is its last ("set_password(service, user, X)").
_MORE_STRINGS = re.compile(
    r"""(?:\s*,\s*(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'))*(?=(?:\.\w+\(\))?\s*,?\s*\))"""
)
_NEXT_KEY = re.compile(r"[ \t]*[:=]")
_LAST_STRING = re.compile(r"""(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')$""")


def _argument_value(text: str, key: str, quote: int, match: re.Match[str]) -> tuple[int, int] | None:
    """Trigger: a quoted string after a secret's name given as a string argument (the key's arg
    group). Why: a call's next argument after a quoted name is a value as often as another name
    (`only("password", "email")`, a schema's `required` list), a call after an unquoted name is a
    setter only when its name says so, and a form field's name is what a test types into.
    Outcome: the value's span without its quotes, or None."""
    arg = match.group("arg").strip()
    start, end = match.span("value")
    if arg == "(":
        name = key.rsplit(".", 1)[-1]
        if match.group("close") or not _SETTER.fullmatch(name.lower()):
            return None
        if "." not in key and not name.lower().startswith(("set", "with")):
            return None  # a constructor or a function of that name (`Token("NUMBER", "42")`), not a builder's
        more = _MORE_STRINGS.match(text, end)
        if more is None:
            return None  # an argument that is not a string follows: not a setter's secret
        if more.end() > end:
            start, end = _LAST_STRING.search(text, end, more.end()).span()
        if not _set_value(text[start + 1 : end - 1], "pass" in name.lower()):
            return None  # a name, a path or a label given to it (`setAppKey("APP_KEY")`)
    elif not match.group("close"):
        return None  # "print(password, 'x')": the name is a variable, not a quoted name
    elif arg == "," and not _FIRST_ARGUMENT.search(text, max(0, quote - 120), quote):
        return None  # a name in a list ("pick(user, ['id', 'password', 'createdAt'])"), not a call's argument
    value = text[start + 1 : end - 1]
    if not value.strip() or _TEMPLATE.fullmatch(value.strip()):
        return None
    if arg != "(" and (not _argument_secret(value) or _NEXT_KEY.match(text, end)):
        return None  # a name or a label, or the next key of an object ({"Name": "DbPassword", "Value": …})
    return start + 1, end - 1


def _argument_secret(value: str) -> bool:
    """A value given after a quoted secret name (a call's argument, a subscript's, Kotlin's `to`) that
    looks like a secret rather than another name, a label, a message or a pattern: a generated key, a
    word of 8 characters or more holding letters and digits, or of 6 or more with a symbol too (not
    `confirm_password`, `OAuth2`, `v2-refresh`, `refresh:v2`, `VARCHAR(255)`), or a long run of words
    and symbols (a WordPress salt), not a sentence or an ICU message."""
    if any(c.isspace() for c in value):
        if "{" in value and "}" in value:
            return False  # a message's format (ICU's "{n, plural, one {# try} …}")
        words = value.split()
        core = "".join(words)
        plain = sum(w.isalpha() and w.islower() and len(w) >= 3 for w in words)
        return (
            len(value) >= 20
            and sum(not c.isalpha() for c in core) * 4 >= len(core)
            and plain * 4 <= len(words)
        )
    if _key_shaped(value):
        return True
    if (
        len(value) < 6
        or ":" in value
        or value[:1] == "^"
        or _SLUG.fullmatch(value)
        or _SQL_TYPE.fullmatch(value)
        or _FILE_NAME.fullmatch(value)
        or _PATH.match(value)
    ):
        return False
    letters, digits = any(c.isalpha() for c in value), any(c.isdigit() for c in value)
    symbol = any(not (c.isalnum() or c in "-._") for c in value)
    return letters and digits and (len(value) >= 8 or symbol)


def _set_value(value: str, password: bool) -> bool:
    """A value a setter named for a secret is given that is one: not a sentence; a password setter's any
    word but a path (`set_password('testpass')`); another's not a name, a path, an id or a slug
    (`"APP_KEY"`, `"/etc/ssl/private/server.key"`, `"prod/db-credentials"`, `"page-2"`)."""
    if any(c.isspace() for c in value):
        return _argument_secret(value)  # a salt, not a label ("Choose a password")
    if password:
        return not _PATH.match(value)
    return len(value) >= 6 and not (
        _NAME_LIKE.fullmatch(value)
        or _SLUG.fullmatch(value)
        or _PATH.match(value)
        or _FILE_NAME.fullmatch(value)
    )


# A name rather than a value: letters only, in camelCase, snake_case or CAPS ("newPassword", "roleId" has a
# capital and no digit); a column's type ("VARCHAR(255)").
_NAME_LIKE = re.compile(r"[A-Za-z][a-z]*(?:[A-Z][a-z]*)*|[a-z]+(?:[_\-.][a-z]+)+|[A-Z]+(?:_[A-Z]+)*")
_SQL_TYPE = re.compile(r"[A-Za-z]+ ?\(\d+(?:, ?\d+)?\)")
_SLUG = re.compile(r"[a-z0-9]+(?:[-/][a-z0-9]+)+")  # "prod/db-credentials", "page-2", "rotate-logs"
# A call's argument after only strings: its opening bracket, then the name's quote ("define('DB_PASSWORD',
# …", "parser.set('database', 'password', …", "Map.of('user', 'app', 'password', …").
_FIRST_ARGUMENT = re.compile(r"""\((?:\s*(?:"[^"\n]*"|'[^'\n]*')\s*,)*\s*$""")


_NAME = re.compile(r"[A-Za-z_][\w.]*")  # a name in code: a method's, a variable's
_RULES = re.compile(r"[a-z_]+(?::[\w,.\-]+)?(?:\|[a-z_]+(?::[\w,.\-]+)?)+")  # "required|string|min:8"
_SYMBOL = re.compile(r"[a-z_][a-z0-9_]*")  # ... and a Ruby symbol's after its colon
# "{{ vault_db_password }}", "${DB_PASSWORD}", Spring's "${db.password}"
_TEMPLATE = re.compile(r"\$?\{\{.*\}\}|\$\{[\w.\-]+(?::?-?[^}]*)?\}")
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
_TO_SPACE = re.compile(r"\S*")
_FILE_KEY = re.compile(r"\.[A-Za-z]{1,5}$")
_LOCATION = re.compile(r"\d+(?::\d+)*[):]?")
_BLOCK_SCALAR = re.compile(r"[|>][+-]?\d?")
_TOKEN_REST = re.compile(r"[^\s\"',;]*")


def _block_lines(text: str, key_start: int, after: int) -> tuple[int, int] | None:
    """A YAML block scalar's lines: those under the key's line, indented deeper than it."""
    line_start = text.rfind("\n", 0, key_start) + 1
    indent = len(text[line_start:key_start]) - len(text[line_start:key_start].lstrip(" -"))
    eol = text.find("\n", after)
    if eol < 0 or text[after:eol].strip():
        return None
    start = end = None
    pos = eol + 1
    while pos < len(text):
        nxt = text.find("\n", pos)
        line = text[pos : nxt if nxt >= 0 else len(text)]
        if line.strip():
            if len(line) - len(line.lstrip(" ")) <= indent:
                break
            if start is None:
                start = pos + len(line) - len(line.lstrip(" "))
            end = pos + len(line.rstrip())
        if nxt < 0:
            break
        pos = nxt + 1
    return (start, end) if start is not None else None


def _looks_like_prose(key: str, match: re.Match[str], text: str, key_start: int) -> bool:
    """Trigger: "word: value" with a lowercase one-word key and a purely alphabetic value.
    Why: that is how sentences read ("the token: it expires"); config keys have _ or capitals,
    and real passwords rarely are a single dictionary-like word.
    Outcome: leave the text alone, unless the key and its value are a line of their own (_yaml_line).
    """
    quoted_key = key_start > 0 and text[key_start - 1] in "\"'"
    if ":" not in match.group("sep") or quoted_key:
        return False
    config_like = any(c in key for c in "_-.") or key.isupper()
    return not config_like and match.group("value").isalpha() and not _yaml_line(text, key_start, match)


def _yaml_line(text: str, key_start: int, match: re.Match[str]) -> bool:
    """Trigger: "password: letmein" alone on its line (a YAML setting), indented or a list item.
    Why: a sentence goes on after its one-word value ("the token: it expires after an hour"); a
    setting's line ends there, and a plain word is then as much a password as any.
    Outcome: the value is hidden."""
    line_start = text.rfind("\n", 0, key_start) + 1
    if text[line_start:key_start].strip(" \t-") or not text[key_start].islower():
        return False
    if match.group("value").lower() in _SCHEMA_WORDS:
        return False
    line_end = text.find("\n", match.end())
    return not text[match.end() : line_end if line_end >= 0 else len(text)].strip()


def _kind(key: str, word: str) -> str:
    lowered = key.lower()
    if "aws_secret_access_key" in lowered:
        return "aws_secret"
    word = word.lower().replace("-", "_")
    if word in _KIND_OF_WORD:
        return _KIND_OF_WORD[word]
    if word.startswith("api"):
        return "api_key"
    return word if "_" in word else word.replace("key", "_key")
