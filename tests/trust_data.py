"""Planted secrets (the 26 kinds of issue 12, section 2) and near-misses that must survive redaction.

Every value here is made up; none is a working credential.
"""

from __future__ import annotations

PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7xQ3fZ"
SERVICE_ACCOUNT_KEY = "-----BEGIN PRIVATE KEY-----\\n" + PEM_BODY + "\\nq9Zr2u\\n-----END PRIVATE KEY-----\\n"

# (kind, text that holds it, the secret that must disappear)
SECRETS = [
    ("aws_key_id", "the id AKIAQWERTYUIOPASDFGH is set", "AKIAQWERTYUIOPASDFGH"),
    (
        "github_classic",
        "push with ghp_Zq8Wm3Xr5Tn7Yv2Bk4Hd6Jf9Lp1Gs0Ce3Ua5 please",
        "ghp_Zq8Wm3Xr5Tn7Yv2Bk4Hd6Jf9Lp1Gs0Ce3Ua5",
    ),
    (
        "github_fine",
        "pat github_pat_11AQWERT0Zx9Yw8Vu7Ts6_Rq5Po4Nm3Lk2Jh1Gf0 ok",
        "github_pat_11AQWERT0Zx9Yw8Vu7Ts6_Rq5Po4Nm3Lk2Jh1Gf0",
    ),
    (
        "openai_project",
        "key sk-proj-Qm4Wn8Ex2Rb6Tc0Yd3Uf7If1Og5Ph9 set",
        "sk-proj-Qm4Wn8Ex2Rb6Tc0Yd3Uf7If1Og5Ph9",
    ),
    ("anthropic", "use sk-ant-api03-Lq2Wk4Ej6Rh8Tg0Yf1Ud3 now", "sk-ant-api03-Lq2Wk4Ej6Rh8Tg0Yf1Ud3"),
    ("slack_bot", "bot xoxb-998877665544-Qw3Er5Ty7Ui9 posts", "xoxb-998877665544-Qw3Er5Ty7Ui9"),
    (
        "jwt",
        "cookie eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJxd2VydHkifQ.Zm9vYmFyYmF6cXV4MTIzNDU2 end",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJxd2VydHkifQ.Zm9vYmFyYmF6cXV4MTIzNDU2",
    ),
    (
        "pem",
        "key:\n-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY + "\n-----END RSA PRIVATE KEY-----\n",
        PEM_BODY,
    ),
    ("postgres_url", "db at postgres://app:Wq7pLm3zRt@db.internal:5432/app", "Wq7pLm3zRt"),
    ("export_token", "export DEPLOY_TOKEN=Dp9Xk2Lm5Qw8Er1T", "Dp9Xk2Lm5Qw8Er1T"),
    ("stripe_secret", "stripe sk_live_51HqWeRtYuIoPaSdFgHjKlZx set", "sk_live_51HqWeRtYuIoPaSdFgHjKlZx"),
    (
        "stripe_restricted",
        "restricted rk_live_51HzXcVbNmAsDfGhJkLqWeRt here",
        "rk_live_51HzXcVbNmAsDfGhJkLqWeRt",
    ),
    (
        "npm",
        "publish with npm_Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz2Xc4Vb6",
        "npm_Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz2Xc4Vb6",
    ),
    ("huggingface", "HF hf_QwErTyUiOpAsDfGhJkLzXcVbNmQwErTy pulls", "hf_QwErTyUiOpAsDfGhJkLzXcVbNmQwErTy"),
    ("gitlab", "ci glpat-Qw3Er5Ty7Ui9Op1As3Df runs", "glpat-Qw3Er5Ty7Ui9Op1As3Df"),
    (
        "sendgrid",
        "mail SG.Qw3Er5Ty7Ui9Op1As3Df5G.Hh7Jk9Lz2Xc4Vb6Nm8Qw0Er2Ty4Ui6Op8As0Df2Gh4Jk sent",
        "SG.Qw3Er5Ty7Ui9Op1As3Df5G.Hh7Jk9Lz2Xc4Vb6Nm8Qw0Er2Ty4Ui6Op8As0Df2Gh4Jk",
    ),
    ("twilio", "twilio SK0123456789abcdef0123456789abcdef key", "SK0123456789abcdef0123456789abcdef"),
    (
        "azure",
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA=;x",
        "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA=",
    ),
    ("curl_user", "curl -u deploy:Cr7lPw9x https://api.acme.test/", "Cr7lPw9x"),
    ("mysql_p", "mysql -u root -pMy5qlR00t acme", "My5qlR00t"),
    ("sshpass", "sshpass -p Ss8hPass2 ssh ops@host", "Ss8hPass2"),
    ("env_pass", "DB_PASS=Kx7mQ2vZp9\nDB_HOST=localhost", "Kx7mQ2vZp9"),
    ("env_secret", "WEBHOOK_SIGNING_SECRET=whsec9Xk2Lm5Qw8", "whsec9Xk2Lm5Qw8"),
    ("prose_password", "By the way, the DB password is Tr0ub4dor&3 for staging.", "Tr0ub4dor&3"),
    ("url_password_with_at", "redis://cache:p@ssW0rd!@cache.internal:6379/0", "p@ssW0rd!"),
    (
        "json_private_key",
        '{"type": "service_account", "private_key_id": "3f9a", "private_key": "'
        + SERVICE_ACCOUNT_KEY
        + '", "client_email": "svc@acme.iam"}',
        PEM_BODY,
    ),
]

# Forms a privacy probe found stored (2026-11-28): a name and its value with only a space between,
# a value on the line after "is", a login's user:password pair, a PIN.
PROBED_SECRETS = [
    (
        "env_name_space_value",
        "AWS_SECRET_ACCESS_KEY Zq8Rk2Lm4NwJalrXUtnFEMI/K7MDENGbPxRfiCYy",
        "Zq8Rk2Lm4NwJalrXUtnFEMI/K7MDENGbPxRfiCYy",
    ),
    ("prose_password_next_line", "the password is\nNextLinePw_4455", "NextLinePw_4455"),
    ("login_pair", "login admin:ColonCred_3381 works on the router", "ColonCred_3381"),
    ("pin", "my PIN is 482913, do not share it", "482913"),
]

# Things that look a little like secrets and must survive untouched.
NEAR_MISSES = [
    "login host:8080 fails with a timeout",
    "pin numpy to 1.26.4 and pin the runner to ubuntu-22.04",
    "the pin is 12 on the header",
    "The password is\n\nrequired for every login",
    "GITHUB_TOKEN secrets.GITHUB_TOKEN",
    "SECRET_KEY_BASE mix phx.gen.secret",
    "log in as admin:admin on the local test box",
    "commit 3f9a1c2e7b4d5a6f8e9d0c1b2a3f4e5d6c7b8a9f fixed it",
    "see e83c5163316f89bfbde7d9ab23ca2e25604af290",
    "short sha 3f9a1c2",
    "uuid 123e4567-e89b-12d3-a456-426614174000 in the log",
    "request id 550e8400-e29b-41d4-a716-446655440000",
    "open daemon/total_recall/redact.py:120 and tests/test_redact.py",
    "/opt/app/lib/python3.11/site-packages/numpy/core/_multiarray_umath.so",
    "C:\\Users\\dev\\AppData\\Local\\Temp\\build_2024_01.log",
    "payload aGVsbG8gd29ybGQsIHRoaXMgaXMgb3JkaW5hcnkgZGF0YQ== decoded fine",
    "image data iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6k"
    "gAAAABJRU5ErkJggg==",
    "def get_api_key_from_env(name): return os.environ[name]",
    "class TokenBucketRateLimiter: pass",
    "max_tokens=4096 and prompt_tokens = 12",
    "PASSWORD_MIN_LENGTH = 12",
    "the password policy requires 12 characters",
    "The token is expired, refresh it.",
    "the password is wrong",
    "the secret is patience",
    "SECRET_KEY = os.environ['SECRET_KEY']",
    "API_KEY=${API_KEY}",
    "AWS_REGION=eu-west-1",
    "DB_HOST=localhost",
    "KEY_COUNT=3",
    "primary_key=True, index=True",
    "sort(key=lambda r: r.id)",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "docker image node@sha256:1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b",
    "version 1.24.3-rc.2+build.20240501",
    "listening on 0.0.0.0:8080 and https://example.com/v1/users?page=2",
    "email alice@example.com about ticket PROJ-1234",
    "the function sk_learn_wrapper handles skip_live_tests",
    "run git rebase -i HEAD~3 then git push --force-with-lease",
    "curl -s https://example.com/health | jq .status",
    "mysql -u root -p acme < dump.sql",
    "ssh -p 2222 ops@host",
    "AccountName=acme;EndpointSuffix=core.windows.net",
    "the variable SKIP_TESTS=1 is set in CI",
    "ORD-2024-000123 shipped",
]
