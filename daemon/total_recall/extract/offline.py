"""The offline extractor: the extraction protocol answered with rules, no network.

Recall comes first: every substantive sentence of a new message becomes an item in the user's
own words (people ask about the facts mentioned in passing), classified by cue phrases and
sentence form. Rules, in the order they run:

- Sentences: code fences are dropped (a one- or two-line command is kept), markdown noise is
  stripped, lines and sentences are split; a sentence over ``MAX_ITEM_CHARS`` is split at clause
  boundaries. Greetings, thanks and acknowledgements are dropped; a fragment of under
  ``SHORT_WORDS`` words joins the next sentence of its message. A message of ``FALLBACK_WORDS``
  or more words always keeps at least its longest sentence.
- Tool lines ("[tool Bash: ls]") are dropped; "[plan]" and "[todos]" blocks (ExitPlanMode;
  TodoWrite, TaskCreate/TaskUpdate) give a decision and step todos, or one todo per entry
  (completed ones close todos).
  An assistant's narration before a tool call or a colon ("Let me check the file.") is dropped.
- Intent, per clause (``classify_clauses``): a question by form ("?", an interrogative opener, a
  request), else the first intent whose cue phrases match once ``NOT_CUES`` blanked phrasings
  that only name it, in the order solution, problem, decision, conclusion, todo; else context.
  Speaker role matters (a user's "I'll add X" is a todo, an assistant's is narration); a reply
  to a reported problem that proposes a fix is a solution; list items of a plan are todos.
- Confidence: 0.7, lowered by hedges ("maybe", "I think"), raised by boosters ("definitely",
  "confirmed"), kept within [0.3, 0.95].
- Entities: file paths, code identifiers, a built-in list of technologies, the project name, and
  capitalised names (a person only with a person cue: vocative, "my friend X", "X said").
- Relations: supersedes on "instead of / switched from / replaced / no longer / rather than", from
  a user's statement or the assistant's own decision, to the most similar earlier item or known idea
  of the same family that names what was replaced (and does not switch from it itself); builds_on
  on "also / additionally" to the previous message's last item; answers from a solution to the
  most similar earlier problem and from a reply of the other role to the questions just asked;
  contradicts on "actually no / that's wrong". Similarity is the embedder's cosine when one is given, else
  word-set Jaccard.
- Topic: see ``_topic``. Explicit transition phrases ("let's move on to", "anyway,") open a new
  topic at that message; "by the way" opens a sub-span. With an embedder, a drop in similarity
  between the two messages before and the two from a point (below ``SHIFT_SIM``: new topic,
  below ``SPAN_SIM``: sub-span) does the same. Otherwise the current topic is kept.
  Names are the span's best noun phrase, summaries lead with decisions and conclusions.
- skip_lines: every new message that yields no item, with the reason.

Deterministic: the same input (and embedder) gives the same output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import structlog

from total_recall.errors import TotalRecallError
from total_recall.extract.protocol import CUT_MARK
from total_recall.transcript import ASSENT_MARKS, assents

log = structlog.get_logger(__name__)

MAX_ITEM_CHARS = 400
SHORT_WORDS = 4  # fragments shorter than this join the next sentence
FALLBACK_WORDS = 8  # a message this long always leaves at least one item
MAX_ITEMS_PER_MESSAGE = 60
MAX_ENTITIES = 12
BASE_CONFIDENCE = 0.7
APPROVAL_CONFIDENCE = 0.8  # an offer the user's reply settled (reply_decision)
SHIFT_SIM = 0.20  # cosine between message windows below which the topic changed
SPAN_SIM = 0.35  # below which a sub-span starts
WINDOW_CHARS = 600  # a message's opening carries its topic; longer texts cost time, not accuracy
MIN_WINDOW_WORDS = 8
JACCARD_MATCH = 0.12  # word-overlap needed to link related items without an embedder
COSINE_MATCH = 0.45
JACCARD_ANSWER = 0.45  # a known question counts as answered only on a strong match
COSINE_ANSWER = 0.65

FAMILY = {
    "decision": "stance",
    "solution": "stance",
    "conclusion": "stance",
    "context": "stance",
    "todo": "task",
    "problem": "issue",
    "question": "issue",
}

# ---------------------------------------------------------------------------------------------
# Vocabulary

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does doesn't
    doing don't down during each few for from further had hadn't has hasn't have haven't having he
    he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in
    into is isn't it it's its itself just let's me more most mustn't my myself no nor not now of off
    on once only or other ought our ours ourselves out over own same shan't she she'd she'll she's
    should shouldn't so some such than that that's the their theirs them themselves then there
    there's these they they'd they'll they're they've this those through to too under until up very
    was wasn't we we'd we'll we're we've were weren't what what's when when's where where's which
    while who who's whom why why's will with won't would wouldn't you you'd you'll you're you've your
    yours yourself yourselves get got gonna gotta really much many lot lots thing things stuff
    one ones may might must shall also still even ever yet well way like just im ive youre dont
    its thats""".split()
)
SMALLTALK = frozenset(
    """hi hey hello hiya yo thanks thank thx ty ok okay k kk sure yes yeah yep yup no nope nah great
    cool nice awesome wow lol haha hahaha hehe good bye goodbye welcome congrats congratulations glad
    love amazing totally absolutely agreed perfect sounds exactly right fine np pleasure appreciate
    appreciated cheers alright oh omg ah aw aww hmm wonderful fantastic incredible super sweet
    happy fun brilliant excellent true indeed definitely see soon care luck same too please sorry
    hear hearing glad awesome so cute lovely beautiful proud inspiring mean means done noted
    understood gotcha""".split()
)
COMMON_CAPITALISED = frozenset(
    """i i'm i've i'd i'll monday tuesday wednesday thursday friday saturday sunday january february
    march april may june july august september october november december today tomorrow yesterday
    however also honestly actually unfortunately anyway well first second third finally meanwhile
    otherwise plus sadly luckily basically overall sure great cool nice wow yes yeah okay ok thanks
    hey hi hello oh so and but or then now here there this that these those it its my your our
    their we you they he she what when where why how which who let please maybe perhaps also note
    todo fixme update edit ps btw english god mom dad mum""".split()
)
# Words too generic to name a topic.
NAME_NOISE = frozenset(
    """anyway talk talking discuss move moving switch switching topic question next new let lets
    anything something everything nothing someone anyone everyone time times day days week weeks
    year years last since made make makes making keep keeps kept take takes taking took feel feels
    felt want wants wanted know knew think thought going went goes come came say said tell told
    look looking looked need needs needed try tried trying start started help helps helped able
    old bad big small little always never often sometimes already again back today tomorrow
    yesterday recently lately remember quick aside wait okay yeah sure actually also use using used
    done doing work working worked""".split()
)
PLACE_PREPOSITIONS = ("in", "to", "from", "at", "near", "visited", "visit", "around", "across", "via")
PERSON_BEFORE = re.compile(
    r"(?:\b(?:with|met|told|asked|tell|ask|thank|thanks|invite|invited|called|texted|married|and)"
    r"|\bmy (?:friend|wife|husband|partner|boss|colleague|coworker|sister|brother|mom|dad|mother|"
    r"father|son|daughter|cousin|neighbou?r|mentor|manager|teacher|aunt|uncle|grandma|grandpa|kid))"
    r"\s*,?\s*$",
    re.IGNORECASE,
)
PERSON_AFTER = re.compile(
    r"^(?:'s\b|’s\b|\s+(?:said|says|told|thinks|thought|asked|mentioned|wants|wanted|suggested|"
    r"recommended|agreed|replied|wrote|is my|was my)\b)"
)

# canonical name -> extra spellings (matched case-insensitively as whole words)
TECHNOLOGIES: dict[str, tuple[str, ...]] = {
    "Python": (),
    "JavaScript": (),
    "TypeScript": (),
    "Node.js": ("nodejs",),
    "Deno": (),
    "Kotlin": (),
    "C++": ("cpp",),
    "C#": ("csharp",),
    "PHP": (),
    "Elixir": (),
    "Erlang": (),
    "Haskell": (),
    "Scala": (),
    "Clojure": (),
    "Lua": (),
    "Perl": (),
    "Zig": (),
    "Golang": (),
    "Bash": (),
    "Zsh": (),
    "PowerShell": (),
    "SQL": (),
    "SQLite": (),
    "sqlite-vec": (),
    "PostgreSQL": ("postgres",),
    "MySQL": (),
    "MariaDB": (),
    "MongoDB": ("mongo",),
    "Redis": (),
    "Elasticsearch": (),
    "OpenSearch": (),
    "Cassandra": (),
    "DynamoDB": (),
    "DuckDB": (),
    "ClickHouse": (),
    "BigQuery": (),
    "Supabase": (),
    "Firebase": (),
    "Prisma": (),
    "SQLAlchemy": (),
    "Alembic": (),
    "Django": (),
    "FastAPI": (),
    "Starlette": (),
    "Uvicorn": (),
    "Gunicorn": (),
    "Pydantic": (),
    "pytest": (),
    "NumPy": (),
    "SciPy": (),
    "scikit-learn": ("sklearn",),
    "PyTorch": ("torch",),
    "TensorFlow": (),
    "Keras": (),
    "JAX": (),
    "ONNX": (),
    "onnxruntime": (),
    "Hugging Face": ("huggingface",),
    "LangChain": (),
    "LlamaIndex": (),
    "OpenAI": (),
    "Anthropic": (),
    "ChatGPT": (),
    "GPT-4": ("gpt-4o", "gpt4"),
    "Ollama": (),
    "llama.cpp": (),
    "vLLM": (),
    "LM Studio": (),
    "Angular": (),
    "Svelte": (),
    "Next.js": ("nextjs",),
    "Nuxt": (),
    "Vite": (),
    "webpack": (),
    "Babel": (),
    "esbuild": (),
    "Tailwind": ("tailwindcss",),
    "jQuery": (),
    "Redux": (),
    "GraphQL": (),
    "gRPC": (),
    "WebSocket": ("websockets",),
    "Docker": (),
    "docker compose": ("docker-compose",),
    "Kubernetes": ("k8s",),
    "Terraform": (),
    "Ansible": (),
    "nginx": (),
    "AWS": (),
    "GCP": (),
    "Azure": (),
    "S3": (),
    "EC2": (),
    "Cloudflare": (),
    "Vercel": (),
    "Netlify": (),
    "Heroku": (),
    "GitHub": (),
    "GitLab": (),
    "Bitbucket": (),
    "GitHub Actions": (),
    "CircleCI": (),
    "Git": (),
    "npm": (),
    "pnpm": (),
    "pip": (),
    "conda": (),
    "Homebrew": (),
    "apt-get": (),
    "Maven": (),
    "Gradle": (),
    "CMake": (),
    "Linux": (),
    "Ubuntu": (),
    "Debian": (),
    "Fedora": (),
    "macOS": ("osx",),
    "WSL": (),
    "iOS": (),
    "Android": (),
    "Xcode": (),
    "VS Code": ("vscode",),
    "Vim": (),
    "Neovim": ("nvim",),
    "Emacs": (),
    "JetBrains": (),
    "PyCharm": (),
    "IntelliJ": (),
    "tmux": (),
    "curl": (),
    "jq": (),
    "SSH": (),
    "systemd": (),
    "launchd": (),
    "cron": ("crontab",),
    "Kafka": (),
    "RabbitMQ": (),
    "ZeroMQ": (),
    "MQTT": (),
    "Prometheus": (),
    "Grafana": (),
    "Datadog": (),
    "OpenTelemetry": (),
    "Twilio": (),
    "Jira": (),
    "Figma": (),
    "Tauri": (),
    "Flutter": (),
    "React Native": (),
    "OpenAPI": (),
    "Swagger": (),
    "JSON": ("jsonl",),
    "YAML": (),
    "TOML": (),
    "Markdown": (),
    "HTML": (),
    "CSS": (),
    "Sass": ("scss",),
    "WebAssembly": ("wasm",),
    "LLVM": (),
    "GCC": (),
    "Clang": (),
    "Jupyter": (),
    "Colab": (),
    "FAISS": (),
    "ChromaDB": (),
    "Pinecone": (),
    "Qdrant": (),
    "Weaviate": (),
    "Milvus": (),
    "pgvector": (),
    "FTS5": (),
    "BM25": (),
    "MiniLM": (),
    "HNSW": (),
    "structlog": (),
    "tenacity": (),
    "httpx": (),
    "aiohttp": (),
    "asyncio": (),
    "watchfiles": (),
    "Selenium": (),
    "Playwright": (),
    "Puppeteer": (),
    "Cypress": (),
    "Vitest": (),
    "ESLint": (),
    "Prettier": (),
    "Ruff": (),
    "mypy": (),
    "Pyright": (),
    "xterm.js": (),
    "MCP": (),
    "Claude Code": (),
    "Tidewave": (),
    "HTTP": (),
    "REST API": (),
    "OAuth": (),
    "JWT": (),
    "TLS": (),
    "CUDA": (),
    "LLM": ("llms",),
    "RAG": (),
    "Windows": (),
    "Unix": (),
    "Tokio": (),
    "Serde": (),
}
# Ordinary words too: matched only with this exact capitalisation and not opening a sentence.
AMBIGUOUS_TECHNOLOGIES = (
    "Go",
    "Rust",
    "Swift",
    "Java",
    "Ruby",
    "Julia",
    "Dart",
    "Flask",
    "Celery",
    "Pandas",
    "Polars",
    "Snowflake",
    "React",
    "Vue",
    "Remix",
    "Astro",
    "Bootstrap",
    "Apache",
    "Slack",
    "Claude",
    "Poetry",
    "Cargo",
    "Jest",
    "Mocha",
    "Phoenix",
    "Bun",
    "Expo",
    "Unity",
    "Spark",
    "Express",
    "Chroma",
    "Electron",
    "Blender",
    "Excel",
    "Notion",
    "Discord",
    "Stripe",
    "Sentry",
    "Helm",
    "Caddy",
    "Jenkins",
    "Safari",
    "Chrome",
    "Firefox",
    "Spring",
    "Rails",
    "Airflow",
    "Obsidian",
    "BERT",
    "Yarn",
    "Node",
    "Make",
    "Hugo",
    "uv",
)

FILE_EXTENSIONS = (
    "py pyi pyx js jsx ts tsx mjs cjs json jsonl toml yaml yml md mdx txt rst sql sh bash zsh fish "
    "rs go java kt kts rb php c h cpp hpp cc cs swift m mm html htm css scss less vue svelte lock "
    "cfg ini conf env xml csv tsv ipynb gradle tf lua ex exs erl hs ml jl dart zig nix proto "
    "graphql db sqlite sqlite3 log pdf png jpg jpeg gif svg wasm onnx parquet plist service "
    "dockerfile makefile gitignore"
).split()

# ---------------------------------------------------------------------------------------------
# Cue phrases (matched against the lowercased sentence)


TOKEN = re.compile(r"[a-z0-9](?:[a-z0-9'+#.-]*[a-z0-9+#])?")


def tokens_of(lowered: str) -> frozenset[str]:
    """The words of a lowercased sentence, for the cheap first-word test of ``Cue``."""
    return frozenset(TOKEN.findall(lowered))


class Cue:
    """Phrases matched as whole words in a lowercased sentence.

    Each phrase starts with a plain word (``'?`` allowed); the rest may use simple regex. The
    regex only runs when one of those first words occurs in the sentence: most sentences have
    none, and skipping the scan is what makes thousands of messages per second possible.
    """

    def __init__(self, *phrases: str, anchored: bool = False, scan: bool = False) -> None:
        firsts: set[str] = set()
        scan_always = scan  # True: the pattern always runs (phrases whose first word is a stem)
        for phrase in phrases:
            group = re.match(r"\(\?:([^()]*)\)", phrase)  # "(?:we|i) will": a choice of first words
            alternatives = group.group(1).split("|") if group else [phrase]
            head = [alternative.split(" ", 1)[0] for alternative in alternatives]
            for first in head:
                first = first.split("(?", 1)[0].replace(",?", "").rstrip(",")  # drop a lookahead
                if not re.fullmatch(r"[a-z0-9'?+#.-]+", first):
                    scan_always = True  # a regex first word: no cheap pre-test, the pattern always runs
                firsts |= {first.replace("'?", "'"), first.replace("'?", "")}
        self.first_words = frozenset(firsts)
        self.scan_always = scan_always
        body = "|".join(phrases)
        self.pattern = re.compile(rf"^(?:{body})\b" if anchored else rf"\b(?:{body})\b")

    def search(self, lowered: str, tokens: frozenset[str]) -> re.Match[str] | None:
        if not self.scan_always and self.first_words.isdisjoint(tokens):
            return None
        return self.pattern.search(lowered)

    def count(self, lowered: str, tokens: frozenset[str]) -> int:
        if not self.scan_always and self.first_words.isdisjoint(tokens):
            return 0
        return len(self.pattern.findall(lowered))


# A labelled line ("Fix: ...", "Decision: ..."); a label named in a list ("feat:, fix: and chore:") is
# not one.
_LABEL = r"(?=\s*:(?!\s*(?:[,;)]|and\b|or\b)))"
CUES: dict[str, Cue] = {
    "solution": Cue(
        # a labelled line: "Fix: pin numpy below 2"
        rf"(?:fix|fixed|solution|workaround|resolved|remedy){_LABEL}",
        r"(?:fixed|resolved|solved) (?:it |this |that |the \w+ )?by",
        r"no longer (?:fails?|crash\w*|errors?|hangs?|times? out|breaks?|throws?|leaks?)",
        r"the fix (?:was|is)",
        r"the solution (?:was|is)",
        r"the trick (?:was|is)",
        r"(?:this|that|which|it) (?:fixes|solves|resolves|removes)",
        # "…, which stops the 429s" (not "it stops responding", "which stops working after an hour")
        r"(?:this|which) (?:stops|prevents|eliminates)\b"
        r"(?! (?:working|responding|running|loading|after|when|us|me|them|you)\b)",
        r"fixes the (?:\w+ ){0,3}(?:error|bug|issue|problem|crash|failure|warning|leak|race)",
        r"(?:pass(?:es)?|passing|green) now\b",
        r"(?:i|we|it|this|that|which) (?:have |has |had |finally |now |just )?(?:fixed|solved|resolved)",
        r"(?:is|was|are|were|got|has been|have been) (?:now |finally )?(?:fixed|solved|resolved)"
        r"(?! (?:quickly|automatically|later))",
        r"fixed (?:with|using|after|it)",
        r"^fixed (?:the |a |an )?\w+",  # a change reported as made: "Fixed the race in the uploader"
        "workaround",
        "worked around",
        "works now",
        "got it working",
        "is working now",
        # a measured improvement reached by an action: "reduced it from 800ms to 300ms by caching"
        r"(?:reduc|brought|bring|cut|improv|lower|dropp?|decreas|sped|speed)\w*\b[^.?!]{0,60}?"
        r"\b(?:from \d+\w*|to \d[^.?!]{0,60}?\b(?:after|by|with)|by \d+(?:\.\d+)?(?= ?%))",
        r"(?:managed|able) to (?:reduce|bring|cut|improve|fix|speed|lower|get it)",
        r"refactored (?:the |my )?\\w+ to use",
        r"(?:added|adding) [^.?!]{0,60}\\bto (?:fix|reduce|avoid|handle the)",
        scan=True,
    ),
    "problem": Cue(
        rf"(?:problem|issue|bug|blocker|symptom){_LABEL}",  # "Issue: the login loops"
        r"the (?:issue|problem|bug|error) (?:is|was)",
        "raises",
        "raised",
        "throws",
        "threw",
        r"(?:getting|get|got|seeing|see|saw|encounter\w*|hit\w*|run\w* into|receiv\w*) (?:an?|the|this|that|"
        r"some|these|those|a "
        r"few)?\s?[\w'\"“”:.-]*\s?(?:[\w'\"“”:.-]+\s){0,6}?(?:errors?|exceptions?|warnings?|"
        r"failures?|issues?|problems?|bugs?|crash\w*)",
        r"keep (?:getting|seeing|hitting)",
        r"still (?:getting|seeing|experiencing|having|failing|broken)",
        r"(?:fails|failed|failing)(?! (?:attempts?|logins?|requests?|calls?))",
        r"\b(?:\w+s|it|they|this|that) fail(?: to| on| with| in| when|$)",
        "stopped working",
        r"stops (?:working|responding|loading|running)",
        r"\bfreez(?:es|ing)\b",
        r"refuses? to (?:start|run|load|compile|build|connect|work)",
        "broken",
        "crash",
        "crashes",
        "crashed",
        "crashing",
        "traceback",
        "segfault",
        "timed out",
        "regression",
        "hangs",
        "deadlock",
        "memory leaks?",
        r"(?:is|are|was|were)n'?t (?:working|showing|displaying|loading|being|triggering|picked)",
        r"(?:is|are|was|were) not (?:working|showing|displaying|loading|being|triggering|picked)",
        r"(?:does|do|did)(?:n'?t| not) (?:seem to )?(?:work|start|run|load|compile|build|make a|trigger|"
        r"display|show|change|fire|get picked|pick|apply|respond|pass|connect|open|save|install|match)",
        "not working",
        r"won'?t (?:start|work|run|load|compile|build)",
        r"(?:can'?t|cannot|couldn'?t|could not) (?:seem to )?(?:get|connect|reach|open|load|start|run|"
        r"import|install|build|compile|log ?in|access|resolve)",
        r"having (?:some )?(?:trouble|issues?|problems?) "
        r"(?:with|getting|making|displaying|loading|implementing"
        r"|handling the|on)",
        r"experiencing (?:some )?(?:slow|issues?|problems?|performance|errors?|a)",
        r"bottleneck",
        r"(?:a|an) \d+ ?ms (?:delay|spikes?|lag)",
        r"\d+ ?ms spikes",
        "nothing seems to work",
        r"(?:still )?(?:looks|seems) (?:wrong|off|broken|incorrect)\b",
        r"flaky",
        r"(?:getting|get|got|seeing|returns?|returning|throws?|throwing) (?:an? |the )?"
        r"(?:http )?[45]\d\ds?\b",
        r"(?:infinite|endless|redirect) loop",
        r"(?:disconnects|drops|restarts|reconnects|crashes) every\b",
        # data a step loses: "the importer drops rows with a BOM", "the sync overwrites newer edits"
        r"\b(?:drops|loses|lost|skips|ignores|swallows|duplicates|corrupts|truncates|overwrites)"
        r" (?:\w+ ){0,3}?(?:rows?|records?|lines?|data|messages?|events?|requests?|files?|fields?|entries"
        r"|edits?|bytes|characters|columns?|items?|headers?)\b",
        r"(?:tentative|too slow|very slow)",
        r"isn'?t being",
        r"(?:has|have) no (?:automated|tests?|checks?)",
        r"(?:blocked|missing or incorrect|not defined|undefined)\b(?! yet)",
    ),
    "decision": Cue(
        rf"(?:decision|decisions|decided|verdict){_LABEL}",  # "Decision: JWT in httpOnly cookies"
        r"(?:i|we) went with",
        r"(?:stick|sticking) (?:with|to)\b",
        r"from now on",
        r"let'?s not(?! forget)",
        "we decided",
        "i decided",
        "we've decided",
        "i've decided",
        "we have decided",
        "i have decided",
        "decided to",
        "decided on",
        "decided against",
        "decide against",
        r"had to decide against",
        r"(?:let'?s|let us) (?:go with|use|stick with|switch to|keep|start with|do it)",
        # "ok lets do the background worker approach", "let's go for option B"
        r"(?:let'?s|let us) (?:do|pick|go for) (?:option [a-d1-4]\b|(?:the |that |this )(?:[\w-]+ ){0,3}?"
        r"(?:approach|option|route|variant|design|one)\b)",
        r"go ahead with",
        rf"(?:plan){_LABEL}",  # "The plan: migrate to Postgres next sprint"
        r"(?:we'll|i'll|we will|i will|i think i'll) (?:use|go with|stick with|switch "
        r"to|keep|try|definitely)",
        "going with",
        "go with",
        "we chose",
        "i chose",
        "chose to",
        "i've chosen",
        "we've chosen",
        r"(?:i|we) (?:have )?chosen",
        r"opted (?:for|to)",
        "settled on",
        r"(?:we're|we are|i'm|i am) (?:going to use|switching to|sticking with|planning to "
        r"(?:use|implement|store|"
        r"add|switch|go))",
        r"agreed (?:to|on)",
        "the plan is",
        r"prefer (?:it|this|that|\w+(?: [\w.]+)?) over",
        r"planning to store",
        "architecture:",
        r"(?:is|seems like|looks like|seems to be|would be) the (?:best|right|clear) "
        r"(?:fit|choice|option|pick)",
        "the way to go",
    ),
    "conclusion": Cue(
        "key insight",
        "key findings?",
        "therefore",
        "turns out",
        "turned out",
        "in conclusion",
        r"the reason (?:is|was)",
        "root cause",
        "this means",
        "which means",
        "that means",
        rf"(?:takeaway|finding|findings|conclusion){_LABEL}",  # "Takeaway: the cache was never invalidated"
        "i realized",
        "i realised",
        "we learned",
        "i learned",
        "lesson",
        r"that explains",
        "which explains",
        "the takeaway",
        "in short",
        "in summary",
        r"i (?:have )?confirmed that",
        r"i've confirmed",
        "found out",
        r"i found no",
        r"(?:i|we) found that",
        r"there might be a tension",
        r"(?:i think|probably) (?:it'?s|this is) because",
        "is caused by",
        r"no \w+ (?:installers?|support) exists?",
        "exist for",
        r"(?:error|issue|problem|this|exception|warning)s? (?:typically |usually |often |generally "
        r")?(?:occurs?|"
        r"happens?|indicates?|means|is caused|is due|is because)",
        r"(?:issues|causes) identified",
    ),
    "todo": Cue(
        "todo",
        "to-do",
        "next steps?",
        "follow-up",
        "follow up",
        "remember to",
        "don'?t forget",
        "let'?s not forget",
        r"we (?:still )?(?:need|have|ought) to",
        r"we should(?! (?:have|'ve|be))",
        r"we must(?! (?:have|'ve|be))",
        "still need to",
        "left to do",
        "still to do",
        r"remaining work",
        rf"action items?{_LABEL}",  # "Action item: ask legal about retention"
        r"remind me to",
        r"next up\b",
        r"(?:that'?s|is) next\b(?! to\b)",
        r"(?:circle|come) back (?:to|on)\b",
        r"eventually[^.?!]{0,60}\bshould\b",
        r"\bpark (?:the|this|that|it)\b",
        r"(?:i|we)'?ll (?:add|write|"
        r"run|reach|convert|set up|schedule|implement|fix|look into|get back|test|update|document|start)",
        r"i (?:will|am going to|'m going to) "
        r"(?:add|write|run|reach|convert|schedule|implement|fix|test|update)",
        "task \\d",
        "epic",
        "tasks? created",
        "beads? created",
        scan=True,  # "i'll" is one token: the first-word pre-test would miss "(?:i|we)'?ll"
    ),
}
# Trigger: these phrasings name an intent without carrying it ("error handling", "trying to decide
# between", a hypothetical failure). Why: the words alone made most requests look like problems or
# decisions. Outcome: the matching span is blanked before the cue of that intent is looked for.
NOT_CUES: dict[str, re.Pattern[str]] = {
    "problem": re.compile(
        r"\b(?:error[- ]handling|handl\w* (?:\w+ )?(?:errors?|exceptions?|failures?)|errors? (?:messages?|"
        r"boundar\w*|status|rate|codes?|logs?|display)|(?:catch|prevent|avoid|anticipat\w*|reduce|"
        r"detect|log|track|report|fix|debug|surface|retr\w*) (?:\w+ )?(?:\w+ )?(?:errors?|issues?|"
        r"problems?|bugs?|exceptions?|failures?|leaks?)|(?:what|in case|even) if [^,.?]*|if (?:the |it |a |"
        r"an |there )[^,.?]*(?:fails?|errors?)|when [^,.?]*fails?|without (?:any "
        r")?(?:errors?|issues?|breaking)"
        r"|if you (?:still )?(?:encounter|run into|face|have|see|get|hit|experience)[^,.?!]*|bug fix\w*"
        r"|known [^,.]*bug|trouble (?:figuring|understanding|deciding|with the (?:integration )?"
        r"test)|potential (?:\w+ )?(?:issues?|problems?|errors?|bugs?)|(?:fixes|fix) (?:\w+ ){0,3}"
        r"(?:immediately|when)|no (?:reported )?(?:downtime|leaks?|errors?))"
    ),
    "decision": re.compile(
        r"\b(?:decide (?:between|whether|on the best|which)|trying to decide|before deciding|"
        r"whether to|should i (?:use|go|switch|stick)|or (?:should|do) i|considering|decision(?:s)? "
        r"(?:together|=|point)|heard (?:that|of|about) [^,.]*|(?:could|might|would) help[^,.]*"
        # an option ("we could go with either Hetzner or OVH"), a git branch ("I switched to the release
        # branch"): nothing chosen for the project
        r"|(?:could|might|may) (?:\w+ )?(?:go with|use|switch to|pick)[^,.;]*"
        r"|switch(?:ed|ing)? (?:back )?(?:to|over to) (?:the |a |my |our )?(?:[\w./-]+ )?branch\b"
        r"|switch(?:ed|ing)? (?:back )?(?:to|over to) (?:main|master|develop|trunk)\b"
        # "decision: not made yet"
        r"|decisions?\s*:\s*(?:not (?:made|decided|final)|pending|tbd|undecided|open)\b)"
    ),
    # advice and predictions, not work anyone took on
    "todo": re.compile(
        r"\b(?:(?:don'?t|do not|doesn'?t|does not|no|never) (?:\w+ )?need to|"
        r"(?:need to|should|must) (?:\w+ )?(?:balance|consider|make sure|ensure|see|be able|keep in mind))"
    ),
    "solution": re.compile(
        r"\b(?:(?:suggest|any|other|further|best|possible) (?:fix|solution)\w*|"
        r"bug fix\w*|never fixed|(?<!managed )(?<!able )"
        r"(?:to|can|could|should|would|will|want|trying|how) (?:further )?"
        r"(?:reduce|improve|cut|lower|bring|speed)\w*[^,.?!]*|"
        r"how (?:to|do i|can i) fix|help me fix|fix (?:this|it|the) ?(?:issue|error)?\?)"
    ),
}
# An assistant's narration of what it is about to do is not a memory ("Let me check the file",
# "Now let's run the tests:", "I'll research the options and then draft beads for you.").
NARRATION = re.compile(
    r"^(?:(?:ok(?:ay)?|good|great|now|next|first|then|alright|so|perfect|done)[,.!:-]?\s+(?:[-—]\s+)?)*"
    r"(?:let me|let's|let us|i'll|i will|i'm going to|i am going to|we'll now|i'm now|i am now|"
    r"i'll now|time to|checking|looking at|listing|reading|searching|running)\b"
)
ASSISTANT_NOW = re.compile(
    r"^(?:(?:ok(?:ay)?|now|next|first|then|so|here)[,.]?\s+)*(?:let me|let's|let us|i'll|i will|we'll|we "
    r"will|"
    r"i'm going to|we're going to)\b|\bwe (?:need|have) to (?!still)"
)
# A user's choice said to the assistant, for the project beyond this step: an instruction that names
# what it is chosen over ("use pnpm instead of npm", "switch the logger to structlog", "move CI off
# Travis"), a bare choice ("polars over pandas", "pnpm not npm"), a preference ("I'd rather keep it in
# one file"), scope ("we'll skip the refactor", "not doing i18n for v1"), or a rule for the future
# ("always run ruff before committing", "pin base images by digest going forward"). A one-off ("for
# now", "this time") chooses nothing lasting. Said by the assistant, the same words are advice.
_OPENER = (
    r"^(?:(?:ok(?:ay)?|so|yeah|yes|please|pls|just|then|and|but|actually|no|nah|hmm|fyi|ok decided"
    r"|let'?s|lets|let us)[,.:]?\s+)*"
)
_THING = r"`?[\w.+#/@-]+`?"  # a name may be quoted as code: "call it `ingest` not `loader`"
_NOT_A_THING = (  # "tests not passing", "it's not found": a state, not an alternative
    r"(?!\w+(?:ing|ed)\b)(?!(?:found|done|set|ready|there|here|yet|sure|true|needed|available|correct|right"
    r"|good|enough|possible|supported|allowed|really|quite|so|too|very|the|a|an|this|that|it|only)\b)"
)
USER_CHOICE = re.compile(
    _OPENER + r"(?:"
    r"(?:use|pick|choose|prefer|go with|stick (?:with|to)|keep|switch to|move to|migrate to)\b"
    r"(?:[^.?!;]|\.(?=\S)){1,80}?"  # a dot inside a path or version ("/v1/...", "20.x") ends nothing
    r"\b(?:instead of|rather than|over|not)\b"
    # a git branch switched to is no choice ("switching back to the main branch now")
    r"|switch(?:ing)? (?![^.,;!?]{0,40}\bbranch(?:es)?\b)(?!(?:back )?to (?:main|master|develop|trunk)\b)"
    r"(?:(?:the|our|my|this|from) )?[\w.-]+(?: [\w.-]+){0,3} (?:over )?to \w"
    r"|move (?:\w+ ){1,3}(?:off|away from) \w"
    r"|(?:adopt|favou?r|prefer|default to|deprecate|sunset|standardi[sz]e on)\b"
    r"|(?!(?:i|it|this|that|you|they|he|she|there|the|a|an|my|our|your|its|try|test|measure|benchmark"
    r"|compare|experiment|see|check)\b)(?!\w+ing\b)\w[^.?!;]{1,80}?"
    r"\b(?:instead of|rather than)\b"
    rf"|(?!(?:{'|'.join(sorted(map(re.escape, STOPWORDS)))}|tests?)\b)"  # "which is over 500ms": no choice
    rf"{_THING}(?: {_THING}){{0,5}},? (?:instead of|rather than|over|not) {_NOT_A_THING}{_THING}"
    r"(?:[.,;!]|\s*$|\s+[-—–]\s|\s+(?:for|from|in|on|across|everywhere|going|as|now)\b)"
    r")"
)
USER_SCOPE = re.compile(
    r"\b(?:(?:we'?ll|we will|we'?re|we are|let'?s|lets|let us) (?:only )?(?:skip|drop|dropping|defer|postpone"
    r"|leave out|support|supporting|standardi[sz]e)\b"
    r"|(?:^|^[^,;:]{1,20}[,;:—]\s*)(?:we'?re |we are |i'?m |i am )?(?:postponing|deferring|dropping|skipping"
    r"|sunsetting|deprecating"
    r"|adopting|leaving|switching to|standardi[sz]ing on)\b"
    r"|\b(?:let'?s|lets|let us) (?:adopt|standardi[sz]e|move to|migrate to|default to|drop|deprecate)\b"
    r"|\bno longer (?:support|use|ship|maintain|allow|accept)\b"
    r"|\bdon'?t bother (?:with|supporting|about)\b"
    r"|\b[\w.+#/-]{1,60} it is(?: for\b[^.!;,]{0,40})?\s*(?:[.!;,—-]|$)"  # bounded: "1.2.3." runs
    r"|^(?:ok |so )?(?:final (?:call|answer|decision)|decided|verdict)\b[^:]{0,30}:"
    r"|(?:^|[,;:.—]\s*)(?:we'?re )?not (?:doing|supporting|adding|building|shipping)\b|\bout of scope\b"
    # "drop the websocket idea", "scrap that rewrite plan": an option given up, not a file removed
    r"|(?:^|[,;:.—]\s*)(?:drop|scrap|ditch|shelve|abandon) (?:the|that|this|our) "
    r"(?:[\w.+#/-]+ ){0,3}(?:idea|plan|approach)\b"
    r"|\b(?:is|are) out (?:for|in) (?:v\d[\w.]*|1\.0|the mvp|mvp|the (?:first|initial) release)\b"
    r"|\b(?:i'?d|i would|we'?d|we would) rather (?!you\b|not say))"
)
USER_RULE = re.compile(  # a rule for what comes after this step, not a habit ("I always forget")
    r"^(?!(?:(?:and|but|so) )?(?:i|i'm|i've|it|it's|this|that|he|she|they)\b)[^?]*"
    r"(?:\b(?:going forward|from here on|from now on|from today on|for (?:all|every) (?:the )?new"
    r"|by default)\b"
    r"|\b(?:on|for|in) (?:all |every |any )?new \w+s\b"  # "uuid v7 for primary keys on new tables"
    r"|(?:^|[,;:.—]\s*(?:and |but )?|\b(?:we|you|should|must|will|'ll|are|is|be|to) )(?:always|never)\b"
    r"(?! \w+ing\b| (?:been|had|was|were|here|there)\b)"  # a habit or an experience, not a rule
    r"|,\s*ever\s*[.!]?\s*$)"  # "nothing secret goes in the repo, ever"
    # "every migration has to be reversible", "all handlers must be idempotent"
    r"|^(?:every|all|each) [\w-]+(?: [\w-]+)? (?:has to|have to|must|should always|needs? to be)\b"
    # "don't add dependencies without asking me first", "dont roll our own"
    r"|^(?:don'?t|dont|do not|never) \w+ [^?]{0,50}\bwithout\b|\b(?:don'?t|dont|do not|never) (?:roll|build"
    r"|write|reinvent) (?:our|your|my) own\b"
)
# A choice said as settled rather than asked for: a label that names it ("Decision on logging: ...",
# "error handling convention: ..."), the team's stance ("we're keeping the monorepo", "we won't ship an
# arm build"), a replacement ("ruff replaces flake8"), a new default ("AdamW is the default now"), or a
# choice followed by retiring what it replaces ("the config format is toml. drop the yaml loader",
# "hosting on vercel, delete the netlify.toml"). A removal alone is a task ("delete the netlify.toml").
_WE_ARE = r"\bwe(?:'re| are)\b"
USER_SETTLED = re.compile(
    r"^(?:[\w&/+ -]{1,40} )?(?:decisions?|conventions?|polic(?:y|ies)|rules?|standards?)"
    r"(?: (?:on|about|for) [\w&/+ -]{1,30})?(?: going forward| from now on)?\s*(?::|->|→)"
    # "decision: not made yet", "security policy: someone reported an XSS": no choice after the label
    r"(?!\s*(?:not (?:made|decided|settled|final)|pending|tbd|undecided|open|unclear|none yet|someone"
    r"|somebody|we (?:need|have) to|can you|could you|what|which|why|how|is there|do we|does|did)\b)"
    rf"|{_WE_ARE} (?:keeping|sticking with|going with|moving to|migrating to|switching to|converting"
    r"|standardi[sz]ing on|only (?:doing|supporting|shipping|targeting|building|offering)"
    r"|not (?:moving|switching|migrating|going|doing|supporting|shipping|adding|building|offering|using) )"
    r"(?!\s*(?:on|forward|ahead|through|back|along|the next|to the next|onto the next|an eye|track|tabs)\b)"
    r"|\bwe (?:won'?t|wont|will not|are not going to|aren'?t going to) (?:ship|support|build|do|use|add"
    r"|allow|target|offer|maintain|adopt)\b"
    r"|^[\w.+#/-]+(?: [\w.+#/-]+){0,4} (?:replaces|supersedes) [\w.+#/-]"
    r"|\bis (?:the|our) (?:new default|new standard|default now|standard now|default going forward)\b"
)
_RETIRE = (
    r"(?:drop|delete|remove|rip out|rip (?:it|them|those|that) out|kill|forget|scrap|ditch|retire|get rid of"
    r"|stop (?:using|logging to|writing to|sending to|publishing to|supporting)"
    r"|mark [^.;,]{1,30} (?:as )?deprecated)\b"
)
_VALUE = r"[\w.+#/&-]+(?: [\w.+#/&-]+){0,3}"
CHOICE_THEN_RETIRE = re.compile(
    r"^(?:(?:fyi|so|ok|okay|note)[,:]? )?"
    # a setting given a value ("the config format is toml", "minSdk is now 26"), not a state ("the
    # build is green. delete the branch" is a task after a status)
    rf"(?:(?:the |our )?[\w.+#/-]+(?: [\w.+#/-]+){{0,3}} (?:(?:is|are|=) now|->|→|:|goes to|go to|moves to)"
    rf" {_VALUE}"
    r"|(?:the |our )?(?:[\w.+#/-]+ ){0,3}(?:format|target|default|standard|stack|provider|host|hosting"
    r"|backend|database|db|language|runtime|framework|engine|orm|library|registry|store|queue|broker|bundler"
    rf"|linter|formatter|package manager|ci|platform|license|licence|style|config|file) (?:is|are|=) {_VALUE}"
    r"|[\w.+#/&-]+(?: [\w.+#/&-]+){0,3} (?:for|on|as) (?:the |our |all |every )?[\w.+#/ -]{1,40}"
    rf"|[\w&/ -]{{1,30}}(?::|->|→) ?{_VALUE})"
    rf"\s*[.,;:—-]+\s+(?:so |and |just |please |you can |we can )?{_RETIRE}"
    # "scrap the graphql layer, just REST", "drop jest, use vitest"
    rf"|^(?:(?:nah|no|ok|okay|so)[,.]? )?{_RETIRE}[^.,;—]{{1,40}}[.,;—]+\s*"
    r"(?:just|only|use|go with|stick with|switch to|move to) \w"
)
# How the assistant should answer ("Always include version numbers when I ask about libraries") is a
# preference of style, not a choice for the project.
ANSWER_STYLE = re.compile(
    r"\bwhen i ask\b|\b(?:in|for) (?:your |all |every )?(?:answers?|replies|explanations?)\b"
    r"|^(?:(?:always|never|please) )?(?:provide|explain|answer|respond|reply|mention|tell me|give me"
    r"|show me)\b"
)
ONE_OFF = re.compile(
    r"\b(?:for now|this time|this (?:\w+ )?run|for the demo|temporarily|just for|for testing|for a sec"
    r"|for the moment|tonight|right now)\b"
    # "until I'm back", "until the fix lands": a pause, unless what waits is deferred work ("postponing
    # the stripe integration until after beta" is scope)
    r"|^(?!.*\b(?:postpon|defer|hold(?:ing)? off|wait(?:ing)? (?:on|with))).*\buntil\b"
)
# A prohibition for the project ("no panics in library code", "kotlin for the android side, no new java
# files", "no mocking the db layer"); "no errors", "no luck" report a state, "no more coffee for me" a
# person's (PERSONAL).
_NO_STATE = (
    r"(?:errors?|warnings?|issues?|problems?|luck|idea|clue|worries|rush|hurry|change|changes|difference"
    r"|output|response|results?|matches|hits|failures?|regressions?|crash(?:es)?|leaks?|effect|improvement"
    r"|success|need|way|longer|one|doubt|sign|trace|data|tests? (?:fail|failed|failing))\b"
)
USER_FORBIDS = re.compile(
    rf"(?:^|[,;:.—]\s*|\s-\s)no (?:more |new )?(?!{_NO_STATE})"
    r"(?!(?:the|this|that|these|those|it|i|you|we|they|not|a|an|my|your|wait|thanks|thank|sorry|need)\b)"
    r"(?:\w+ing (?:the|our|a|an|any|it|them|[\w.+#/-]+ (?:in|on|for|at))\b"
    r"|[\w.+#/-]+(?: [\w.+#/-]+){0,3} (?:in|on|for|at|inside|outside|anymore|at all|ever|allowed)\b"
    r"|[\w.+#/-]+(?: [\w.+#/-]+){0,3}\s*[.!]?\s*$)"
)
PERSONAL = re.compile(r"\bfor me\b")
# A choice said as the project's state rather than asked for: ruled out ("Windows support: not
# happening", "multi-tenant is a v2 thing", "graphql is off the table"), a setting named beside what it
# is not ("secrets come from Vault, not env files", "we'll deploy on fly.io, not heroku"), settled said
# outright ("let's lock that in", "the decision is Terraform", "we agreed in standup to drop 3.8"), a
# rule for every item ("every endpoint needs an OpenAPI entry"), "don't ever ...", the team's tool ("we're
# using SQS for the job queue", "we're staying on mongo"), a move stated as under way ("CI moves to github
# actions", "we're moving the pipeline off pandas onto polars").
_NOT_AN_OPTION = (  # ", not yet", ", not sure", ", not a bug": no alternative named
    r"(?!(?:a|an|the|this|that|these|those|it|me|you|us|them|sure|yet|now|really|quite|just|only|even|too|so"
    r"|very|much|all|always|entirely|necessarily|bad|great|good|ideal|working|found|done|needed|broken"
    r"|ready|enough|here|there|again|anymore|ever|exactly)\b)(?!\w+(?:ing|ed|ly)\b)"
)
# ", not X" names an alternative only after a setting said for the project (a future, a rule, where a
# thing lives or goes), not after a report ("the timeout happens on staging, not prod"), a pointer
# ("that's the old endpoint, not v2") or a one-off ("run it against staging, not prod").
_SETTING_VERB = (
    r"(?:will|'ll|shall|should|must|goes|go|lives?|belongs?|stays?|comes? from|uses?|deploys?|hosted|runs? on"
    r"|we(?:'re| are) using"
    r"|(?:is|are) (?:done|handled|kept|stored|hosted|built|written))"
)
_REPORT_SUBJECT = r"(?:error|errors|bug|bugs|issue|crash|failure|timeout|leak|exception|warning|problem)s?"
USER_STANCE = re.compile(
    r"\b(?:is|are) (?:off the table|a v\d+ thing|a (?:later|future) thing|not happening)\b"
    r"|(?:^|[:—-]\s*)not happening\b"
    rf"|^(?!(?:that'?s|it'?s|this is|run|try|check|test|see)\b)(?![^,]*\b{_REPORT_SUBJECT}\b)"
    rf"[^,]*\b{_SETTING_VERB}\b[^,]*,\s*not "
    r"(?:(?:in|on|at|inside|under|via|through|from|with|by) (?:the |a |an |each |every |our |its )?)?"
    rf"{_NOT_AN_OPTION}[\w.+#/-]+(?: [\w.+#/-]+){{0,3}}\s*(?:[.!;]|$)"
    r"|\block (?:that|it|this) in\s*(?:[.!,;—-]|$|then\b|now\b)"
    r"|\bthat'?s (?:final|settled)\b|\bset in stone\b"
    r"|\bthat'?s the (?:protocol|standard|convention|contract)\s*(?:[.!,;—-]|$|now\b|going forward\b)"
    r"|^(?:scratch that|never ?mind|on second thought|change of plans?)[,.:;!—-]*\s+(?:let'?s |we )?"
    r"(?:keep|stay (?:on|with)|stick (?:with|to)|go back to|revert to)"
    r" (?!going|at it|trying|working|looking)\w"
    r"|\b(?:we'?re|we are) not (?:writing|rolling|building|reinventing) (?:our|my) own\b"
    r"|\b(?:the )?(?:decision|verdict|final call) is "
    r"(?!(?:up to|yours|mine|pending|open|tbd|not|still|hard|tough|difficult|easy|made)\b)\w"
    r"|\b(?:we|everyone|the team) (?:all )?agreed\b[^.;]{0,30}?\b(?:to|that we(?:'ll| will)?) "
    r"(?:use|drop|go|switch|move|keep|adopt|support|skip|defer|standardi[sz]e|stick|stay|ship|replace|remove|deprecate|target"
    r"|require|ban|allow|limit|cap)\b"
    r"|\b(?:it'?s|it is|it was|it'?s been) (?:agreed|decided|settled)"
    r"(?=\s*(?:[.:,;!—-]|$|that\b|then\b|now\b))"
    r"|^(?:every|all|each) [\w-]+(?: [\w-]+)? (?:needs?|requires?|gets?) (?!to\b)\w"
    r"|\b(?:don'?t|do not|dont) ever \w"
    r"|\bwe'?re (?:staying (?:on|with)|moving (?:\w+ ){1,3}(?:off|onto|to))\b"
    r"|\bwe'?re using (?!(?:way|too|a lot|lots|more|less|much|the wrong|an? old|the old|up|it|this|that)\b)"
    r"[\w.+#/-]+(?: [\w.+#/-]+){0,2}"
    r" (?:for|as|instead|over|now|going forward|from now on|everywhere|across)\b"
    r"|^[\w.+#/-]+(?: [\w.+#/-]+){0,2} (?:moves|is moving|migrates|is migrating) (?:to|off|onto) \w"
)
# A change across the project ("replace winston with pino across the backend") is a choice; an edit
# across it ("rename UserDTO across the codebase") is a task.
USER_EVERYWHERE = re.compile(
    r"^(?!(?:(?:and|but|so) )?(?:i|i'm|i've|it|it's|this|that|he|she|they|there)\b)"
    r"(?!(?:rename|fix|reformat|format|update|bump|clean up|run|lint|refactor|add|check|search|grep|find"
    r"|replace (?:this|that|these|those|the \w+ (?:call|loop|line|variable|function)s?)\b)\b)"
    r"[^?]*\b(?:everywhere|project[- ]wide|repo[- ]wide"
    r"|(?:across|throughout|to every|to all|for every|in every|in all|on every|on all)"
    r" (?:all )?(?:the |our )?"
    r"(?:[\w-]+ )?(?:backend|frontend|services?|codebase|repo|project|app|apps|stack|monorepo|packages?"
    r"|modules?|endpoints?|board|copy|code|apis?|clients?|handlers?|routes?|screens?|pages?|tables?))\b"
)


# "go with parquet for the intermediate files": a pick by name (not "go with your second suggestion",
# a pick for this step among the assistant's offers, which bench/approvals.py covers)
GO_WITH = re.compile(
    _OPENER + r"go with (?!(?:your|the|that|this|these|those|it|option|whatever|whichever|what|a|an|my)\b)\w"
)


def _chooses_nothing(lowered: str) -> bool:
    """A one-off ("for now", "until I'm back") or how to answer: no choice for the project."""
    return bool(ONE_OFF.search(lowered) or ANSWER_STYLE.search(lowered))


def _opens_with_choice(lowered: str) -> bool:
    """A user's sentence that opens by choosing; what follows is its reason, whatever words it uses."""
    return bool(USER_CHOICE.match(lowered) or GO_WITH.match(lowered))


def _user_choice(lowered: str) -> bool:
    """Whether a user's sentence that does not open by choosing settles a choice for the project:
    scope, a rule, a choice said as settled, a prohibition, a change across the project."""
    return bool(
        USER_SCOPE.search(lowered)
        or USER_RULE.search(lowered)
        or USER_SETTLED.search(lowered)
        or CHOICE_THEN_RETIRE.match(lowered)
        or (USER_FORBIDS.search(lowered) and not PERSONAL.search(lowered))
        or USER_EVERYWHERE.search(lowered)
        or USER_STANCE.search(lowered)
    )


NARRATION_END = re.compile(r"(?:[:.…]|\.\.\.)\s*$")
SHORT_NARRATION_WORDS = 22
# Choices that are advice when nobody in the clause made them ("use X instead of Y" in a how-to).
WEAK_DECISION = Cue(
    r"(?:switch|switched|switching) (?:(?:the|our|its|this) \w+(?: \w+)? )?(?:from|over|to)",
    "instead of",
    "rather than",
)
# A change reported as made, naming what it replaced (a reply's summary of what it did, or a user's):
# "Switched the session store from Memcached to Redis", "Replaced the retry loop with tenacity". Only
# at a sentence's start (an anchored match: it costs nothing on the sentences it does not open).
CHANGE_MADE = re.compile(
    r"(?:switched|migrated|moved|swapped|replaced|changed)\b(?:[^.?!;]|\.(?=\S)){1,100}?"
    r"\b(?:from [^.?!;]{1,60}? to|with|to use|over to|instead of)\b"
)
FIRST_PERSON = re.compile(r"\b(?:i|we|i'm|i've|i'll|we're|we've|we'll|let's|my|our|us)\b")
INTENT_ORDER = ("solution", "problem", "decision", "conclusion", "todo")
# A negative opener asks only with its subject ("doesn't it work?"); without one it is a report with
# the subject dropped ("can't connect to the database", "doesn't start").
INTERROGATIVE = re.compile(
    r"^(?:(?:what|why|how|when|where|who|whom|whose|which|can|could|should|would|will|shall|is|are|am|"
    r"was|were|do|does|did|have|has|had|may|might|anyone|any idea|any thoughts)\b(?!'t)"
    r"|(?:isn't|aren't|doesn't|don't|didn't|won't|wouldn't|can't|couldn't|shouldn't)\s+(?:i|you|we|they|"
    r"it|he|she|this|that|there|these|those|the|your|my|our)\b)"
)
WONDER = Cue(
    "i wonder",
    r"i'?m not sure (?:yet )?(?:if|whether|how|why|what)",
    r"not sure (?:yet )?(?:if|whether)",
    # still open: "we haven't decided on the hosting provider", "the region is TBD"
    r"(?:haven'?t|have not|hasn'?t|has not|not yet) (?:yet )?(?:decided|settled|figured out|agreed)",
    r"\bundecided\b",
    r"\btbd\b",
    r"any idea (?:how|why|what)",
    r"wondering (?:if|whether|how|why)",
)
HEDGES = Cue(
    "maybe",
    "might",
    "probably",
    "i think",
    "i guess",
    "not sure",
    "perhaps",
    "possibly",
    "could be",
    "i believe",
    "likely",
    "unsure",
    "seem",
    "seems",
    "apparently",
    "kind of",
    "sort of",
    "i suppose",
    "not certain",
    "unclear",
)
BOOSTERS = Cue(
    "definitely",
    "confirmed",
    "always",
    "we decided",
    "certainly",
    "verified",
    "for sure",
    "absolutely",
    "clearly",
    "guaranteed",
    "proven",
    "never",
    "tested",
    "works",
)
SUPERSEDES = Cue(
    "instead of",
    "switch from",
    "switched from",
    "switching from",
    r"switched over from",
    "changed from",
    "changing from",
    r"replace",
    "replaced",
    "replacing",
    "no longer",
    "rather than",
    "moved away from",
    r"migrated (?:from|off)",
    r"migrating (?:from|off)",
    r"migrate (?:from|off)",
    "dropped",
    "dropping",
    "not anymore",
)
SUPERSEDED_TERM = re.compile(
    r"\b(?:instead of|from|replac(?:ed|ing|e)|no longer (?:use|using|need)?|rather than|away from|"
    r"off|dropp(?:ed|ing))\s+([\w.+#-]+(?:\s+[\w.+#-]+){0,2})"
)


def replaced_terms(lowered: str) -> set[str]:
    """The words that mean something among the three after a supersede cue ("switched from the
    old MySQL setup" -> old, mysql): what was replaced is named by one of them, or by none."""
    match = SUPERSEDED_TERM.search(lowered)
    return content_words(match.group(1)) if match else set()


BUILDS_ON = re.compile(
    r"^(?:also|additionally|furthermore|moreover|in addition|on top of that|building on|plus|and also)\b"
)
CONTRADICTS = Cue(
    "actually,? no",
    r"that'?s (?:wrong|not right|not true|incorrect|not it|not the case)",
    "not true",
    "contrary to",
    "you'?re wrong",
    "i was wrong",
    r"no,? (?:that|it) (?:is|was)n'?t",
)
TOPIC_SHIFT = re.compile(
    r"^(?:let'?s move on|moving on|let'?s switch|switching (?:gears|topics?|to)|next topic|new topic"
    r"|new question|different (?:topic|question)|chang(?:e|ing) (?:of |the )?subject|on (?:a|another) "
    r"(?:different|unrelated|other) note|unrelated[,:]|anyway[s]?\b|ok(?:ay)?,? (?:now|next)\b"
    r"|let'?s talk about|let'?s (?:work on|look at) something else)"
)
SUB_SPAN = re.compile(
    r"^(?:by the way|btw|side note|quick question|one more thing|as an aside|also,? (?:a )?quick "
    r"question|before i forget|tangent)"
)

# ---------------------------------------------------------------------------------------------
# Text splitting

PLAN_MARK = "\u2063"  # invisible separator: marks a list item of a plan inside this module only
PLAN_LEAD = re.compile(
    r"\b(?:tasks?|milestones?|todos?|to-dos?|plan|action items?|remaining|left to do|"
    r"follow-ups?|next steps?|sprints?|phases?|timeline|schedule|roadmap|backlog|"
    r"before (?:the )?(?:public )?(?:launch|release|deploy\w*))\b"
)
HEADING_WORDS = 8
LEAD_IN_WORDS = 6  # "**Definition of Done:**", "Steps:": a line that only introduces the list below it
TASK_ABOUT = re.compile(r"^(?:description|summary|goal|objective|what|why)\b")
STEP_LEAD = re.compile(
    r"\b(?:steps?|tasks?|todos?|to-dos?|action items?|work items?|next|plan|phases?|milestones?)\b"
)
FENCE = re.compile(r"```[^\n]*\n?(.*?)(?:```|\Z)", re.DOTALL)
URL = re.compile(r"https?://\S+")
HEADING = re.compile(r"^#{1,6}\s+")
QUOTE = re.compile(r"^(?:>\s*)+")
LIST_MARK = re.compile(r"^(?:[-*+•◦▪]\s+|\d{1,3}[.)]\s+|>\s*)+(?:\[[ xX]\]\s*)?")
RULE = re.compile(r"^[-*_=]{3,}$")
TABLE_SEPARATOR = re.compile(r"^\|?[\s:|-]+\|?$")
BOLD = re.compile(r"(\*\*|__)(.+?)\1")
ITALIC = re.compile(r"(?<![\w*])\*(?!\s)([^*\n]+?)\*(?![\w*])")
LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\s]*\)")
BACKTICK = re.compile(r"`([^`\n]+)`")
SPACES = re.compile(r"[ \t]{2,}")
# Markup tags: hyphenated (Claude Code's <command-name>) or common HTML; not generics like Vec<u8>.
TAG = re.compile(
    r"</?(?:[a-z]+-[a-z-]+|br|p|div|span|b|i|em|strong|code|pre|kbd|sup|sub|details|summary)"
    r"(?:\s[^<>]*)?/?>"
)
SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9¿¡])")
ABBREVIATION = re.compile(
    r"(?:\b(?:e\.g|i\.e|etc|vs|mr|mrs|ms|dr|prof|st|no|approx|fig|cf)\.|\b[A-Z]\.)$", re.IGNORECASE
)
CLAUSE = re.compile(r"(?<=[;:,])\s+|\s+(?=(?:but|and|so|because|which|while|although|whereas|then)\s)")
WORD = re.compile(r"[A-Za-z0-9][\w'’.-]*[\w]|[A-Za-z0-9]")


def _strip_inline(text: str) -> str:
    if "<" in text:
        text = SPACES.sub(" ", TAG.sub(" ", text))
    text = LINK.sub(r"\1", text)
    text = BOLD.sub(r"\2", text)
    text = ITALIC.sub(r"\1", text)
    return text.strip()


def _blocks(content: str) -> list[str]:
    """Paragraph-like pieces of a message: lines, with soft-wrapped lines joined."""
    blocks: list[str] = []
    plan = False  # inside a list introduced as tasks, milestones, next steps or a plan
    plan_level = 7  # heading level that opened it (7: a "...:" lead-in line, ended by a paragraph)
    steps: bool | None = None  # inside it, whether the last sub-lead-in ("Steps:", "Edge cases:") lists work
    for raw in content.splitlines():
        line = raw.strip()
        if not line or RULE.match(line) or TABLE_SEPARATOR.match(line):
            if line == "" and blocks and blocks[-1] != "":
                blocks.append("")
            continue
        quote = QUOTE.match(line)  # a quoted section ("> ## Problem") keeps its heading a heading
        inner = line[quote.end() :] if quote else line
        is_heading = bool(HEADING.match(inner))
        listed = bool(LIST_MARK.match(line)) and not is_heading
        line = LIST_MARK.sub("", HEADING.sub("", inner if is_heading else line))
        if line.startswith("|"):
            line = "; ".join(cell.strip() for cell in line.strip("|").split("|") if cell.strip())
        bare = BOLD.sub(r"\2", line).strip() if plan and not is_heading else ""  # only read inside a plan
        lead_in = bare.endswith(":") and len(bare.split()) <= LEAD_IN_WORDS
        if is_heading:
            level = len(inner) - len(inner.lstrip("#"))
            if not (plan and level > plan_level):  # a sub-heading of a plan section stays in it
                plan, plan_level = bool(PLAN_LEAD.search(line.lower())), level
            steps = None
        elif plan and lead_in:
            # Inside a task, "**Steps:**" lists work; "**Output files:**", "**Edge cases:**" or
            # "**Definition of Done:**" list what the work touches or must meet, not more work.
            lowered = bare.lower()
            if not TASK_ABOUT.search(lowered):  # "Description:" tells what the task is: it stays one
                steps = bool(STEP_LEAD.search(lowered))
        elif not listed and line.endswith(":"):
            if not plan:
                plan, plan_level = bool(PLAN_LEAD.search(line.lower())), 7
        elif not listed and plan_level == 7:
            plan = False
        if is_heading and len(line.split()) < HEADING_WORDS:
            continue  # section titles like "## Summary" or "The Key Decision" say nothing on their own
        if listed and plan and steps is not False and not lead_in:
            line = PLAN_MARK + line
        open_line = bool(blocks and blocks[-1]) and blocks[-1][-1] not in ".!?:"
        soft_wrap = open_line and not listed and line[:1].islower()
        if soft_wrap:
            blocks[-1] += " " + line
        else:
            blocks.append(line)
    return [b for b in blocks if b]


LIST_HEAD_WORDS = 6  # of a list item, named after the line that leads into the list
LIST_HEAD_END = re.compile(r":\s|\s[—–-]\s|\s\(|\.\s|\.$|,\s")
LIST_GIST_ITEMS = 8


def lead_in_lists(content: str) -> dict[str, str]:
    """{the line that leads into a list, as _key reads it: the heads of the list's items}.

    "Add three quality tools as dev dependencies:" followed by "- **Credo** for static analysis",
    "- **Dialyxir** ..." is remembered as "... dependencies: Credo; Dialyxir; mix_audit": the
    sentence alone says there were three tools and not which (each item stays a memory of its
    own as well). A head is an item's bold name, else its words up to a colon, dash, bracket,
    comma or full stop; only a list whose every item has one of at most LIST_HEAD_WORDS words
    counts (a list of sentences says what it lists itself). Only the top-level items right after
    the line count, at least two; code fences are not read.
    """
    out: dict[str, str] = {}
    lines = FENCE.sub("\n", content).splitlines()
    for i, raw in enumerate(lines):
        line = raw.strip()
        if not line.endswith(":") or LIST_MARK.match(line) or HEADING.match(line):
            continue
        heads: list[str] = []
        indent = None
        for follow in lines[i + 1 :]:
            if not follow.strip():
                if heads:
                    break
                continue
            mark = LIST_MARK.match(follow.strip())
            depth = len(follow) - len(follow.lstrip())
            if not mark:
                break
            if indent is None:
                indent = depth
            if depth > indent:
                continue  # a sub-item
            if depth < indent:
                break
            heads.append(_list_head(follow.strip()[mark.end() :]))
        if len(heads) >= 2 and all(heads):  # a list of names; a list of sentences says them itself
            out[_key(line)] = "; ".join(heads[:LIST_GIST_ITEMS])
    return out


def _list_head(item: str) -> str:
    bold = BOLD.match(item)
    if bold:
        head = bold.group(2).strip().rstrip(":").strip()
    else:
        text = _strip_inline(item)
        end = LIST_HEAD_END.search(text)
        head = text[: end.start()] if end else text
    words = BACKTICK.sub(r"\1", head).split()
    return " ".join(words).rstrip(".,;:") if len(words) <= LIST_HEAD_WORDS else ""


def _key(text: str) -> str:
    """A line or a sentence as lead_in_lists matches them: markup, backticks and case dropped."""
    return " ".join(BACKTICK.sub(r"\1", _strip_inline(text)).lower().split())


def with_list(text: str, gists: dict[str, str]) -> str:
    """`text` and, when it is a line leading into a list (lead_in_lists), the heads of the list's
    items after it, within MAX_ITEM_CHARS."""
    if not gists or not text.rstrip().endswith(":"):
        return text
    key = _key(text)
    for lead, gist in gists.items():
        if key.endswith(lead) or (len(key) >= 12 and lead.endswith(key)):
            room = MAX_ITEM_CHARS - len(text) - 1
            heads = gist.split("; ")
            while heads and len("; ".join(heads)) > room:
                heads.pop()
            return f"{text} {'; '.join(heads)}" if len(heads) >= 2 else text
    return text


def sentences(content: str) -> list[str]:
    """The sentences of a message in order, markdown stripped, none over MAX_ITEM_CHARS.

    Code fences are left out, except a one- or two-line snippet (usually a command), kept with its
    lines joined by "; " as the end of the sentence written right before it ("Initialize the
    migration repository: flask db init"): that sentence says what the command does, the command
    what to run, and neither is a memory alone (as a fragment of its own, a command was joined to
    the next sentence: "flask db init Generate the initial migration script:"). With no prose
    before it, or no room, it is a "sentence" of its own.
    """
    out: list[str] = []
    position = 0
    for fence in FENCE.finditer(content):
        prose = _prose_sentences(content[position : fence.start()])
        out.extend(prose)
        lines = [ln.strip() for ln in fence.group(1).splitlines() if ln.strip()]
        if 0 < len(lines) <= 2 and sum(map(len, lines)) <= 200:
            snippet = "; ".join(lines)
            if prose and len(prose[-1]) + 1 + len(snippet) <= MAX_ITEM_CHARS:
                out[-1] = f"{out[-1]} {snippet}"
            else:
                out.append(snippet)
        position = fence.end()
    out.extend(_prose_sentences(content[position:]))
    return out


def _prose_sentences(prose: str) -> list[str]:
    out: list[str] = []
    for block in _blocks(prose):
        for sentence in _split_sentences(_strip_inline(block)):
            out.extend(_split_long(sentence))
    return out


def _split_sentences(block: str) -> list[str]:
    pieces: list[str] = []
    for piece in SENTENCE_END.split(block):
        if pieces and ABBREVIATION.search(pieces[-1]):
            pieces[-1] += " " + piece
        elif piece.strip():
            pieces.append(piece.strip())
    return pieces


def _split_long(sentence: str) -> list[str]:
    if len(sentence) <= MAX_ITEM_CHARS:
        return [sentence]
    parts: list[str] = []
    for clause in CLAUSE.split(sentence):
        while len(clause) > MAX_ITEM_CHARS:
            cut = clause.rfind(" ", 0, MAX_ITEM_CHARS)
            cut = cut if cut > MAX_ITEM_CHARS // 2 else MAX_ITEM_CHARS
            parts.append(clause[:cut].strip())
            clause = clause[cut:].strip()
        if parts and len(parts[-1]) + 1 + len(clause) <= MAX_ITEM_CHARS:
            parts[-1] += " " + clause
        elif clause:
            parts.append(clause)
    return [p for p in parts if p]


def words_of(text: str) -> list[str]:
    return WORD.findall(text)


def content_words(text: str) -> set[str]:
    """Lowercased words that carry meaning (no stopwords, light plural folding)."""
    out = set()
    for word in words_of(text.lower()):
        word = word.replace("’", "'").rstrip(".'")
        if word.endswith("'s"):
            word = word[:-2]
        if len(word) > 1 and word not in STOPWORDS:
            out.add(word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith("ss") else word)
    return out


LEADING_VOCATIVE = re.compile(r"^\s*(?:(?P<interjection>\w+)\s*[,!]?\s+)?(?P<name>[A-Z][a-z]+)\s*[,!]\s*")
TRAILING_VOCATIVE = re.compile(r"\s*,\s*(?P<name>[A-Z][a-z]+)\s*(?P<end>[.!?…]*)\s*$")


def is_person_like(name: str) -> bool:
    low = name.lower()
    return low not in COMMON_CAPITALISED and low not in STOPWORDS and low not in TECH_FIRST_WORDS


def strip_vocative(text: str) -> str:
    """Drop a name the speaker addresses ("Thanks, Mel!", "Caroline, glad you came").

    Who a remark was said to is not what it says; left in, the name makes every such remark match
    any question about that person. Lists ("Python, Rust and Go") and technologies stay.
    """
    return vocatives(text)[1]


def vocatives(text: str) -> tuple[list[str], str]:
    """(the names a sentence addresses, the sentence without them): strip_vocative's reading."""
    out, names = text, []
    m = TRAILING_VOCATIVE.search(out)
    if m and is_person_like(m.group("name")) and "," not in out[: m.start()].rsplit(" and ", 1)[-1][-1:]:
        out = out[: m.start()] + (m.group("end") or ".")
        names.append(m.group("name"))
    m = LEADING_VOCATIVE.match(out)
    if m and is_person_like(m.group("name")):
        interjection = m.group("interjection")
        if interjection is None or interjection.lower() in SMALLTALK | {"woah", "woohoo", "whoa", "yay"}:
            rest = out[m.end() :]
            out = rest[:1].upper() + rest[1:]
            names.append(m.group("name"))
    return names, out.strip() or text


# A speaker tag that opens a turn ("Melanie: ...", "Dr Smith: ..."), as in a chat written out by
# hand or exported from another tool. Labels ("Error: ...", "Summary: ...") are not speakers.
SPEAKER_TAG = re.compile(r"^\s*(?P<name>[A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*){0,2}):\s+(?=\S)")
LABELS = frozenset(
    """error errors warning warn info debug fatal exception traceback question answer summary result
    results output input step example fix tip hint reason problem solution decision conclusion status
    goal task issue bug important caution usage cause expected actual""".split()
)


def speaker_tag(text: str) -> tuple[str | None, str]:
    """(the speaker's name, the rest) of a turn that opens with a speaker tag, else (None, text)."""
    m = SPEAKER_TAG.match(text)
    if m is None:
        return None, text
    first = m.group("name").split()[0].rstrip(".")
    if first.lower() in LABELS or not is_person_like(first):
        return None, text
    return m.group("name"), text[m.end() :]


def recurring_speakers(messages: list[dict]) -> frozenset[str]:
    """The speaker tags that open at least two of ``messages`` (a chat written out as "Name: text").

    Trigger: a message opening with "Word: ". Why: once, it is more often a label the extractor reads
    as the intent ("Plan: migrate to Postgres", "Decided: keep the monorepo", "Workaround: pin numpy")
    than a speaker; a speaker opens turn after turn. Outcome: only a recurring tag is taken off an
    idea's text; a label stays, and with it the intent it names."""
    seen: dict[str, int] = {}
    for message in messages:
        name = speaker_tag(str(message.get("content") or ""))[0]
        if name:
            seen[name] = seen.get(name, 0) + 1
    return frozenset(name for name, count in seen.items() if count >= 2)


def is_smalltalk(text: str) -> bool:
    """Only greetings, thanks and acknowledgements, perhaps with a name ("Thanks, Mel!").

    Also a remark addressed to someone by name that says next to nothing ("I totally agree,
    Caroline.", "Wow, Mel, way to go!"): the name would make it match every question about that
    person, so it is small talk, not a memory.
    """
    stripped = strip_vocative(text)
    if stripped != text:
        substantive = [
            w
            for w in words_of(stripped)
            if w.lower().replace("’", "'") not in STOPWORDS | SMALLTALK and len(w) > 2
        ]
        if len(substantive) <= 1:
            return True
    names = greeting = False
    for word in words_of(text):
        lowered = word.lower().replace("’", "'")
        if lowered in SMALLTALK:
            greeting = True
        elif lowered in STOPWORDS:
            continue
        elif word[:1].isupper() and word[1:].islower():
            names = True
        else:
            return False
    return greeting or not names


# ---------------------------------------------------------------------------------------------
# Entities

_EXT = "|".join(sorted(FILE_EXTENSIONS, key=len, reverse=True))
FILE_PATH = re.compile(
    rf"(?<![\w/.~@-])(?:(?:~|\.{{1,2}})?/)?(?:[\w@+-][\w.@+-]*/)*[\w@+-][\w.@+-]*\.(?:{_EXT})(?![\w/-])"
    r"|(?<![\w/.:~@-])(?:~|\.{1,2})/[\w.@+-]+(?:/[\w.@+-]+)*/?"
    r"|(?<![\w/.:~@-])/(?:[\w.@+-]+/)+[\w.@+-]*"
    r"|(?<![\w*/])\*{1,2}(?:/\*{1,2})*(?:/[\w*.-]+)*\.\w+",
    re.IGNORECASE,
)
IDENTIFIER = re.compile(
    r"(?<![\w./-])(?:[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+"
    r"|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z]+(?:[A-Z][a-z0-9]+)+"
    r"|[A-Za-z_]\w+(?:\.[A-Za-z_]\w+)+)(?:\(\))?(?![\w/-])"
)
CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w{2,})\(\)")
CAPITALISED = re.compile(r"(?<![\w'’-])[A-Z][a-z]+(?:[ -][A-Z][a-z]+)?(?![\w'’-])")


def _tech_index() -> tuple[re.Pattern[str], dict[str, str]]:
    names: dict[str, str] = {}
    for canonical, aliases in TECHNOLOGIES.items():
        for alias in (canonical, *aliases):
            names[alias.lower()] = canonical
    for canonical in AMBIGUOUS_TECHNOLOGIES:
        names[canonical.lower()] = canonical
    alternation = "|".join(re.escape(n).replace(r"\ ", r"\s+") for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![\w.@/-])(?:{alternation})(?![\w@/+#]|-\w|\.\w)"), names


TECH_PATTERN, TECH_NAMES = _tech_index()
TECH_FIRST_WORDS = frozenset(name.split()[0] for name in TECH_NAMES)
MAYBE_PATH = re.compile(r"[/*~]|\.[A-Za-z]")
MAYBE_IDENTIFIER = re.compile(r"[_.][A-Za-z]|[a-z][A-Z]|[A-Z][a-z]+[A-Z]")
AMBIGUOUS = frozenset(AMBIGUOUS_TECHNOLOGIES)


def _technologies(text: str, lowered: str, tokens: frozenset[str]) -> list[tuple[str, int, int]]:
    """(canonical name, start, end) of each technology named in the text."""
    if TECH_FIRST_WORDS.isdisjoint(tokens):
        return []
    found = []
    for match in TECH_PATTERN.finditer(lowered):
        canonical = TECH_NAMES[re.sub(r"\s+", " ", match.group(0))]
        if canonical in AMBIGUOUS:
            surface = text[match.start() : match.end()]
            if surface != canonical or _opens_sentence(text, match.start()):
                continue
        found.append((canonical, match.start(), match.end()))
    return found


def _opens_sentence(text: str, start: int) -> bool:
    before = text[:start].rstrip(" \"'([*_")
    return not before or before[-1] in ".!?:;…" or before.endswith((" -", " —"))


def entities(text: str, project: str = "") -> list[dict]:
    """Entities named in one sentence (backticks still in it), most specific first; never the kind
    a redaction mark names ("[REDACTED:openai_key]" made an entity `openai_key` of every memory
    that had held a key)."""
    text = URL.sub(" ", text) if "://" in text else text
    if "[" in text:
        from total_recall.redact import MARKS

        text = MARKS.sub(" ", text)
    lowered, tokens = normalise(text)
    out: dict[str, dict] = {}

    def add(name: str, kind: str) -> None:
        name = name.strip().rstrip(".,;:!?'\"()`").lstrip("'\"(`")
        if len(name) > 1 and name.lower() not in out:
            out[name.lower()] = {"name": name, "type": kind}

    if project and project.lower() in lowered:
        if re.search(rf"(?<![\w-]){re.escape(project.lower())}(?![\w-])", lowered):
            add(project, "project")
    techs = _technologies(text, lowered, tokens)
    for canonical, _, _ in techs:
        add(canonical, "technology")
    if "`" in text:
        for match in BACKTICK.finditer(text):
            _add_backticked(match.group(1), add)
    _code_names(text, add)
    _proper_nouns(text, techs, add)
    return list(out.values())[:MAX_ENTITIES]


def _code_names(text: str, add: Any) -> None:
    """File paths and code identifiers; each regex runs only if its tell-tale characters occur."""
    if MAYBE_PATH.search(text):
        for match in FILE_PATH.finditer(text):
            if match.group(0).lower() not in TECH_NAMES:
                add(match.group(0), "file")
    if MAYBE_IDENTIFIER.search(text):
        for match in IDENTIFIER.finditer(text):
            if match.group(0).lower() not in TECH_NAMES and not FILE_PATH.fullmatch(match.group(0)):
                add(match.group(0), "concept")
    if "()" in text:
        for match in CALL.finditer(text):
            add(match.group(1) + "()", "concept")


def _add_backticked(code: str, add: Any) -> None:
    code = code.strip()
    if not code or len(code) > 80 or len(code.split()) > 4:
        return
    if code.lower() in TECH_NAMES:
        add(TECH_NAMES[code.lower()], "technology")
    elif FILE_PATH.fullmatch(code):
        add(code, "file")
    else:
        add(code, "concept")


def _proper_nouns(text: str, techs: list[tuple[str, int, int]], add: Any) -> None:
    """Capitalised names: persons only with a person cue, places and the rest as concepts."""
    taken = [(start, end) for _, start, end in techs]
    for match in CAPITALISED.finditer(text):
        name, start = match.group(0), match.start()
        first = name.split()[0].split("-")[0].lower()
        if first in COMMON_CAPITALISED or first in STOPWORDS or first in SMALLTALK or first.endswith("ly"):
            continue
        if any(s <= start < e for s, e in taken) or name.lower() in TECH_NAMES:
            continue
        if _opens_sentence(text, start):
            continue  # a capital that opens a sentence says nothing about the word
        before, after = text[:start], text[match.end() :]
        person = bool(PERSON_BEFORE.search(before) or PERSON_AFTER.match(after) or _vocative(before, after))
        preceding = before.split()[-1].lower() if before.split() else ""
        add(name, "person" if person and preceding not in PLACE_PREPOSITIONS else "concept")


def _vocative(before: str, after: str) -> bool:
    """'Thanks, Mel!' / 'Wow, Melanie, ...': a name addressed after a greeting or interjection."""
    words = [w.lower() for w in words_of(before)]
    if not words or len(words) > 3 or not re.match(r"\s*(?:[,!?.]|$)", after):
        return False
    return all(w in SMALLTALK or w in STOPWORDS for w in words)


# ---------------------------------------------------------------------------------------------
# Classification


def normalise(sentence: str) -> tuple[str, frozenset[str]]:
    """The lowercased sentence (straight apostrophes) and its tokens, as the cues expect them."""
    lowered = sentence.lower().replace("’", "'")
    return lowered, tokens_of(lowered)


QUESTION_CLAUSE = Cue(
    r"(?:can|could|would|will) (?:you|someone|anyone|i|we)\b",
    r"how (?:do|can|should|would|does) (?:i|we|it|this)",
    r"(?:is|are) there (?:a|any)",
    r"what(?:'s| is| are) the (?:best|right)",
    r"any (?:suggestions|advice|ideas|"
    r"thoughts|recommendations)",
    r"i'?m (?:not sure|wondering|unsure) (?:how|if|whether|what|where|which|why)",
    r"i am (?:not sure|wondering|unsure) (?:how|if|whether|what|where|which|why)",
    r"(?:i'?d|i would) (?:like|love|appreciate)(?: it)? (?:to know|to see|to get|some|any|if)",
    r"i need help",
    r"(?:i'?m|i am) looking for (?:advice|help|guidance)",
    r"not sure (?:how|where) to start",
    r"help me (?:understand|figure|with|review|implement|fix|debug|build|write|create|improve|set)",
    r"(?:does|do) (?:this|that|it) (?:work|look)",
)
CLAUSE_CUT = re.compile(
    r"(?:(?<=[.!])\s+(?=\w)|;\s+|,\s+(?=(?:but|and|so|however|although|though|because|since|which|can you"
    r"|could you|maybe|also|then|as|considering|now|i'?ve|i'?m|i have|i am|i'?d|i want|i need|i think|i'?ll"
    r"|we'?ll|we'?ve)\b)"
    r"|\s+(?=but\s))"
)


def _cue(intent: str, lowered: str, tokens: frozenset[str]) -> bool:
    negated = NOT_CUES.get(intent)
    if negated is not None:
        blanked = negated.sub(" ", lowered)
        if blanked != lowered:
            lowered, tokens = blanked, tokens_of(blanked)
    if CUES[intent].search(lowered, tokens):
        return True
    if intent == "decision":
        return bool(WEAK_DECISION.search(lowered, tokens) and FIRST_PERSON.search(lowered)) or bool(
            CHANGE_MADE.match(lowered)
        )
    # TypeError, ConnectionResetError, NullPointerException, a 404 status
    return intent == "problem" and bool(
        ERROR_NAME.search(lowered) and not NOT_CUES["problem"].search(lowered)
    )


ERROR_NAME = re.compile(
    r"\b(?!handle|on|log|show|display|render|catch|throw|raise|set|get|is|has|custom|http)"
    r"\w+(?:error|exception)\b(?!\s+(?:handling|message|when))"
)


def _is_question(sentence: str, lowered: str, tokens: frozenset[str], clause: bool = False) -> bool:
    if lowered.rstrip(" \"')]*_~").endswith("?") or WONDER.search(lowered, tokens):
        return True
    if QUESTION_CLAUSE.search(lowered, tokens):
        return True
    opening = not clause and INTERROGATIVE.match(lowered)  # inside a sentence "which" is relative
    return bool(opening and not re.search(r"[.!]\s*$", sentence) and len(tokens) <= 25)


def classify(
    sentence: str,
    normalised: tuple[str, frozenset[str]] | None = None,
    role: str = "user",
    clause: bool = False,
) -> str:
    """The intent of one clause or sentence: question by form, else the first cue that holds.

    Cue phrases are looked for after ``NOT_CUES`` blanked phrasings that only name an intent
    ("error handling", "trying to decide between", "what if it fails"). An assistant's "I'll ..."
    is narration of the next step, not a todo; a user's is a commitment.
    """
    lowered, tokens = normalised or normalise(sentence)
    if _is_question(sentence, lowered, tokens, clause):
        return "question"
    chooses = role == "user" and not _chooses_nothing(lowered)
    if chooses and _opens_with_choice(lowered):
        return "decision"  # "go with parquet, csv is way too slow": the reason is not a problem report
    for intent in INTENT_ORDER:
        if intent == "todo" and role == "assistant" and ASSISTANT_NOW.search(lowered):
            continue  # the assistant says what it does now ("We'll add error handling ..."), not later
        if _cue(intent, lowered, tokens):
            return intent
    return "decision" if chooses and _user_choice(lowered) else "context"


def classify_clauses(sentence: str, role: str = "user") -> list[tuple[str, str]]:
    """(text, intent) pieces of a sentence: one piece unless its clauses carry different intents.

    "I'm trying to decide between X and Y, but I chose X, can you help me with the setup?" holds
    a decision and a question; each becomes its own item. Clauses without a typed intent stay
    with the typed clause before them (or the next one, at the start).
    """
    whole = classify(sentence, None, role)
    clauses = [c.strip() for c in CLAUSE_CUT.split(sentence) if c and c.strip()]
    if len(clauses) < 2:
        return [(sentence, whole)]
    typed = [(c, classify(c, None, role, clause=i > 0)) for i, c in enumerate(clauses)]
    kinds = [k for _, k in typed if k != "context"]
    if len(set(kinds)) <= 1:
        return [(sentence, kinds[0] if kinds else whole)]
    groups: list[list] = []
    for text, kind in typed:
        if groups and (kind == "context" or kind == groups[-1][1] or groups[-1][1] == "context"):
            groups[-1][0].append(text)
            if groups[-1][1] == "context":
                groups[-1][1] = kind
        else:
            groups.append([[text], kind])
    out = []
    for texts, kind in groups:
        text = ", ".join(t.rstrip(",") for t in texts)
        out.append((text[:1].upper() + text[1:], kind))
    return out


def confidence(sentence: str, intent: str, normalised: tuple[str, frozenset[str]] | None = None) -> float:
    lowered, tokens = normalised or normalise(sentence)
    hedges = HEDGES.count(lowered, tokens)
    boosts = BOOSTERS.count(lowered, tokens)
    value = BASE_CONFIDENCE - 0.15 * min(hedges, 2) + 0.1 * min(boosts, 2)
    if intent == "decision" and not hedges:
        value += 0.05
    return round(min(0.95, max(0.3, value)), 2)


# ---------------------------------------------------------------------------------------------
# The extractor


STRUCTURED = re.compile(r"\[(plan|todos)\]\n(.*?)\n\[/\1\]", re.DOTALL)
TODO_ROW = re.compile(r"^- \[(pending|in_progress|completed)\] (.+)$", re.MULTILINE)
TASK_HEADING = re.compile(r"^(?:task|step|phase|milestone)\s*\d+\s*[:.)-]\s*(.+)$", re.IGNORECASE)
APPROACH_HEADING = re.compile(
    r"\b(?:approach|solution|architecture|design|decision|chosen|strategy|overview)\b"
)
MAX_PLAN_TODOS = 20
STEP_SECTION = re.compile(r"\b(?:steps?|tasks|todos?|to-dos?|action items|milestones|remaining|work items)\b")
# "X is done", "finished X", "I've completed X": a statement that closes an open todo
DONE_STATEMENT = re.compile(
    r"\b(?:is|are|was|were|now|all|has been|have been) (?:now "
    r")?(?:done|finished|completed|complete|merged|shipped)\b"
    r"|^(?:i'?ve |we'?ve |i have |we have |just )?(?:finished|completed|done with|wrapped up|checked off)\b"
    r"|\bmarked (?:it |them |\w+ )?(?:as )?(?:done|complete|completed)\b"
)


# A user's short yes to a proposal is where a decision is made ("Shall I apply the freezegun fix?" -
# "yes do that"). A yes: a short reply that assents (transcript.ASSENT_WORDS, a thumbs-up), says at
# most one word of its own ("yeah nuke it", a typo), asks nothing and hesitates nowhere.
APPROVAL_WORDS = frozenset(
    """yes yep yeah yup ya yea y sure ok okay k kk alright sounds looks good great perfect fine cool nice
    go ahead for it do that this please let's lets let us proceed continue approved approve lgtm sgtm
    ship agreed agree correct right absolutely definitely of course makes sense thanks thank you works
    me with plan both all pls plz thx ty would be will that's thats is lol""".split()
)
HESITANT = frozenset(
    """no nope nah not don't dont wait hold later first instead but maybe hmm actually tomorrow never
    stop rather unless except only check before until""".split()
)
APPROVAL_MAX_WORDS = 12
# The proposal a yes settles: the message's closing clause, read from the end (over its last three
# sentences): a question offering one action ("Shall I ...?", "Want me to ...?", "How about I ...?"),
# an offer or recommendation ("I can ...", "I'd recommend ...", "The cleanest fix is to ..."), or,
# when the closing question only asks leave ("Shall I proceed?", "Want me to do that?"), what the
# message said it would do. A question offering alternatives ("X or Y?") is not settled by a yes.
PROPOSAL_QUESTION = re.compile(
    r"^(?:so,? |then,? |ok(?:ay)?,? |alright,? )?"
    r"(?:(?:shall|should|can|may) (?:i|we)(?: go ahead and)?|(?:do you want|would you like|want) (?:me|us) to"
    r"|ready (?:for me )?to|ok(?:ay)? (?:if i|to)|(?:how|what) about (?:if )?(?:i|we)|what if (?:i|we)"
    r"|would it help if (?:i|we))"
    r" (?P<act>.+?)(?: now| for you| next| then| instead)?\s*\?$"
)
PROPOSAL_STATEMENT = re.compile(
    r"\b(?:i (?:propose|suggest|recommend)|i'd (?:propose|suggest|recommend|go with)"
    r"|i would (?:propose|suggest|recommend|go with)"
    r"|my (?:recommendation|suggestion|proposal|vote) (?:is|would be)"
    r"|(?:recommendation|proposal|suggestion):"
    r"|(?:(?:the|one|an?|my) (?:\w+ )?(?:fix|option|approach|way|solution|plan)|(?:the )?next step)"
    r"\b[^.?!]{0,60}? (?:is|would be)"
    r"|let me know if (?:you(?:'d)? (?:want|like) me to|i should)|(?:i'm |i am )?happy to)"
    r"\s*(?:that we |that you |to |we )?(?P<act>.+?)(?:,? if you(?:'d)? (?:want|like)(?: me to)?"
    r"|,? if (?:that|this) works(?: for you)?)?[.!]?$"
)
OFFER = re.compile(  # only as the message's closing words: "I can wire up Sentry in main.ts."
    r"^(?:i can|i could|we can|we could|i'll|i will|i'd|next,? i'd|next,? i'll)(?: also)? (?P<act>.+?)"
    r"(?:,? if you(?:'d)? (?:want|like)|,? if (?:that|this) works(?: for you)?)?[.!]?$"
)
INTENDED = re.compile(
    r"^(?:(?:next|then|first),? )?(?:i'll|i will|i'm going to|i am going to|i plan to|i'd|i would|i can"
    r"|i could|we can|we could|the plan is to|plan:|next step(?: would be| is)?:?(?: to)?)"
    r"\s+(?P<act>.+?)[.!]?$"
)
LEAVE_QUESTION = re.compile(
    r"^(?:ready|ok|okay|sound good|sounds good|good to go|ok with you|look good|looks good|proceed|continue"
    r"|go ahead|shall i|should i|shall we|should we|want that|want me to"
    r"|(?:shall|should) i (?:go ahead|proceed)|ok to (?:proceed|go ahead|go on|continue)"
    r"|(?:want|would you like) me to (?:do that|go ahead|proceed))\s*\?$"
)
FILLER = re.compile(
    r"^(?:let me know(?: what you think| if .*)?|just (?:say|let me know).*|thoughts|what do you think"
    r"|up to you|your call|happy to help)\W*$"
)
CLAUSE_BREAK = re.compile(
    r"; +| [-–—] +|: +(?=[A-Z]|(?:shall|should|want|would|do you|can|ready)\b)"
    r"|, (?=(?:so|then|now|want|should|shall) )"
)
VAGUE_ACTS = frozenset(
    "proceed continue go going keep on ahead do it do that start begin implement this it that".split()
)
LEAD_WORDS = re.compile(r"^(?:also|just|now|then|go ahead and|either) ", re.IGNORECASE)
# Alternatives a reply picks from: "Should I use zod or yup?", "Do you want it under /v1/, or should
# we start /v2/?", or an offer of two ("I can either X or Y", "We could X or Y") before "Which do you
# prefer?" / "Any preference?".
OPTIONS_QUESTION = re.compile(
    r"^(?:so,? )?(?:do you (?:want|prefer)|would you (?:like|prefer|rather)|should (?:i|we|it)|shall (?:i|we)"
    r"|is it better to|want)\b (?P<act>.+\bor\b.+?)\s*\?$"
)
CHOICE_QUESTION = re.compile(
    r"^(?:which (?:one |option )?(?:do you prefer|would you (?:like|prefer)"
    r"|should (?:i|we) (?:do|use|go with|pick)|sounds better|do you want)|any preference|preference"
    r"|what do you prefer|what would you prefer"
    r"|your (?:call|pick|choice)|which is better)\s*\?$"
)
ALTERNATIVE = re.compile(r",? \bor\b (?:else )?", re.IGNORECASE)
OPTION_LEAD = re.compile(
    r"^(?:(?:shall|should|can|could|would|do) (?:i|we|you)"
    r"(?: want(?: me| us)? to| like(?: me| us)? to| rather)?"
    r"|(?:i|we) (?:can|could)(?: either)?|either|by|to|instead)\s+",
    re.IGNORECASE,
)
REFERRING = re.compile(r"\b(?:it|them|this|that|these|those)$", re.IGNORECASE)  # an act's object said before
ORDINALS = {
    "first": 0,
    "former": 0,
    "1st": 0,
    "second": 1,
    "2nd": 1,
    "third": 2,
    "3rd": 2,
    "latter": -1,
    "last": -1,
}
# A refusal that names another action: "no, let's profile it first", "nah, fix the selector instead".
REFUSAL = re.compile(r"^(?:no|nope|nah|actually|instead)\b[\s,.;:!–—-]*(?P<rest>.*)$", re.IGNORECASE)
ACTION_LEAD = re.compile(r"^(?:let's|lets|let us|we should|you should|please|just|instead)\b", re.IGNORECASE)
NOT_ACTIONS = frozenset("need worries worry problem idea way thx".split())
THUMBS = ASSENT_MARKS | {"🙏"}  # a reply of marks alone: the reader's assent marks, and thanks


def _reply_words(text: str) -> list[str]:
    """A reply's words, lowercased, "’" read as "'"; a word none of the lists knows loses a repeated
    last letter ("yess", "okk"), a known one keeps it ("all", "will")."""
    words = [w.replace("’", "'") for w in re.findall(r"[\w'’]+", text.lower())]
    return [w if w in APPROVAL_WORDS or w in STOPWORDS else re.sub(r"(.)\1+$", r"\1", w) for w in words]


def is_approval(reply: str) -> bool:
    """A short yes: assents, says at most one word of its own, asks nothing, hesitates nowhere."""
    words = _reply_words(reply)
    thumbs = bool(THUMBS.intersection(reply))
    if "?" in reply or len(words) > APPROVAL_MAX_WORDS or HESITANT.intersection(words):
        return False
    if not assents(" ".join(words)) and not thumbs:
        return False
    own = [w for w in words if w not in APPROVAL_WORDS and w not in STOPWORDS]
    return len(own) <= 1


@dataclass(frozen=True)
class Offer:
    """What an assistant message put to the user: one action, or alternatives ("X or Y?")."""

    act: str | None = None
    options: tuple[str, ...] = ()

    def named(self) -> str:
        return self.act or " or ".join(self.options)


def offer_in(previous: str) -> Offer | None:
    """The action, or the alternatives, an assistant message offered in its closing clauses (read
    from the end over its last three sentences); None when it offered nothing a reply can settle."""
    clauses = [
        c.strip()
        for sentence in sentences(previous)[-3:]
        for c in CLAUSE_BREAK.split(" ".join(sentence.replace("’", "'").split()))
        if c.strip()
    ]
    leave, closing, choice = False, True, False  # a closing question asked leave / asked which
    for place, clause in reversed(list(enumerate(clauses))):
        lowered = clause.lower()
        if FILLER.match(lowered) and not PROPOSAL_STATEMENT.search(lowered):
            continue
        if not (leave or choice) and LEAVE_QUESTION.match(lowered):
            leave = True
            continue
        if closing and CHOICE_QUESTION.match(lowered):
            choice = True
            continue
        match = (
            (INTENDED.match(lowered) if leave or choice else PROPOSAL_QUESTION.match(lowered))
            or OPTIONS_QUESTION.match(lowered)
            or PROPOSAL_STATEMENT.search(lowered)
            or (OFFER.match(lowered) if closing or choice else None)
        )
        closing = False
        if match is None:
            if leave or choice:
                return None
            continue
        start, end = match.span("act")
        act = LEAD_WORDS.sub("", clause[start:end].strip(" ,;:"))
        if re.search(r"\bor\b", act, re.IGNORECASE):
            options = tuple(_option(o) for o in ALTERNATIVE.split(act))
            return Offer(options=options) if len(options) > 1 and all(options) else None
        if choice:
            return None  # "which do you prefer?" after one action: nothing to choose between
        meant = content_words(act) - VAGUE_ACTS
        if len(meant) == 1 and place and REFERRING.search(act) and not leave:
            # "Commit a1b2c3d broke the import. Should I revert it?": the act with what "it" is
            return Offer(act=f"{act} ({clauses[place - 1].rstrip(' .!:')})")
        if len(meant) < 2:  # "Shall I proceed?", "Want me to commit this?"
            if leave:
                return None
            leave = True
            continue
        return Offer(act=act)
    return None


def _option(text: str) -> str:
    """One alternative as an action: "should we start a /v2/ namespace" -> "start a /v2/ namespace"."""
    text = text.strip(" ,;:.")
    while (lead := OPTION_LEAD.match(text)) is not None and lead.end() < len(text):
        text = text[lead.end() :]
    return LEAD_WORDS.sub("", text)


def reply_decision(reply: str, previous: str) -> str | None:
    """The decision a user's reply to an assistant's offer makes, as a statement: a short yes to
    one action ("yes do that": the action), a pick among alternatives ("zod": "Use zod rather than
    yup ..."), or a refusal that names another action ("no, let's profile it first": that action,
    rather than the one offered). None when the reply settles nothing: a bare yes to alternatives, a
    hesitation, thanks, or an offer of nothing in particular."""
    offer = offer_in(previous)
    if offer is None or "?" in reply:
        return None
    if offer.act and is_approval(reply):
        return _statement(offer.act)
    if offer.options and (chosen := picked_option(reply, offer.options)) is not None:
        others = " or ".join(o for i, o in enumerate(offer.options) if i != chosen)
        return _statement(f"{offer.options[chosen]} rather than {others}")
    if (instead := redirected(reply)) is not None:
        return _statement(f"{instead}, rather than {offer.named()}")
    return None


def picked_option(reply: str, options: tuple[str, ...]) -> int | None:
    """Which of the alternatives a short reply names: by its words that only that option has
    ("retries w backoff" of "bump the timeout" / "add retries with backoff"), or by position ("the
    second one", "the latter"); None when it names none, several, or hesitates."""
    words = _reply_words(reply)
    if not words or len(words) > APPROVAL_MAX_WORDS:
        return None
    if len(words) <= 4 and (places := [ORDINALS[w] for w in words if w in ORDINALS]):
        return places[0] % len(options) if len(set(places)) == 1 else None
    if HESITANT.intersection(words):
        return None
    said = content_words(reply) - APPROVAL_WORDS
    own = [content_words(o) for o in options]
    scores = [
        len(said & (mine - set().union(*(w for j, w in enumerate(own) if j != i))))
        for i, mine in enumerate(own)
    ]
    best = max(scores)
    return scores.index(best) if best and scores.count(best) == 1 else None


def redirected(reply: str) -> str | None:
    """The action a refusal names instead ("no, fix the selector instead": "fix the selector
    instead"); None for a plain no, a deferral ("nah, maybe later"), or a reason alone ("no, the
    tests are flaky")."""
    refusal = REFUSAL.match(" ".join(reply.split()))
    if refusal is None:
        return None
    rest = refusal["rest"].strip(" .!")
    first = (_reply_words(rest) or [""])[0]
    if not ACTION_LEAD.match(rest) and (
        not first
        or first in STOPWORDS
        or first in HESITANT
        or first in APPROVAL_WORDS
        or first in NOT_ACTIONS
    ):
        return None
    if len(content_words(rest) - HESITANT - VAGUE_ACTS) < 2:
        return None
    return rest


def _statement(act: str) -> str:
    return act[:1].upper() + act[1:] + "."


def _structured_blocks(content: str) -> tuple[str, list[tuple[str, str, bool]]]:
    """Plans and todo lists (rendered by the transcript reader) -> (rest of content, pieces).

    A todo list (TodoWrite, TaskCreate/TaskUpdate) gives one todo per entry; a completed entry
    closes that todo. An
    ExitPlanMode plan gives a decision (its title and the first sentence of its approach) and one
    todo per step: a numbered item, an item of a steps/tasks section, or a "Task N: ..." heading.
    """
    pieces: list[tuple[str, str, bool]] = []
    for match in STRUCTURED.finditer(content):
        if match.group(1) == "todos":
            for status, text in TODO_ROW.findall(match.group(2)):
                pieces.append((text.strip(), "todo", status == "completed"))
        else:
            pieces.extend(_plan_pieces(match.group(2)))
    return STRUCTURED.sub("", content), pieces


def _plan_pieces(plan: str) -> list[tuple[str, str, bool]]:
    title, section, approach, steps = "", "", "", []
    body = FENCE.sub("", plan)
    for raw in body.splitlines():
        line = raw.strip().lstrip(">").strip()
        if not line:
            continue
        heading = HEADING.match(line)
        if heading:
            text = _strip_inline(HEADING.sub("", line)).strip()
            task = TASK_HEADING.match(text)
            if task:
                steps.append(task.group(1).strip())
            if not title:
                title = re.sub(r"^(?:implementation )?plan\s*[:—-]\s*", "", text, flags=re.IGNORECASE)
            section = "" if task else text.lower()
            continue
        listed = LIST_MARK.match(line)
        text = _strip_inline(LIST_MARK.sub("", line)).strip()
        if not listed and text.endswith(":") and len(words_of(text)) <= 4:
            section = text.lower()  # a bold pseudo-heading ("**Steps:**")
            continue
        if listed and (re.match(r"^\d{1,3}[.)]", line) or STEP_SECTION.search(section)):
            steps.append(text)
        elif not approach and APPROACH_HEADING.search(section) and not listed:
            approach = (_split_sentences(text) or [text])[0]
    pieces = []
    if title:
        pieces.append((f"Plan: {title}", "decision", False))
    if approach:
        pieces.append((approach, "decision", False))
    seen = set()
    for step in steps[:MAX_PLAN_TODOS]:
        if step and step.lower() not in seen and len(words_of(step)) >= 2:
            seen.add(step.lower())
            pieces.append((BACKTICK.sub(r"\1", step), "todo", False))
    return pieces


PROPOSED_FIX = Cue(
    r"here(?:'s| is) (?:the|an?|your) (?:updated|corrected|revised|fixed|improved|modified|refined|enhanced)",
    r"(?:should|will) (?:now )?(?:resolve|fix|solve|work|display|ensure|help you (?:identify and )?resolve)",
    r"to (?:fix|resolve|address|solve) (?:this|the|these|that|both)",
    r"let'?s (?:address|fix|resolve)",
    r"(?:ensure|make sure) (?:that )?(?:you|the|your)",
    r"the fix",
    r"solutions?",
    r"\b(?:it|this|that|they|which) now "
    r"(?:uses|waits|checks|compares|returns|handles|retries|skips|reads|calls)\b",
    r"should be (?:placed|used|called|set|defined|applied)",
    r"(?:replace|switch to|use) \w+ instead",
    scan=True,
)


def _reports_problem(content: str) -> bool:
    """Whether a (user) message reports a problem in any clause of its first 40 sentences."""
    return any(
        kind == "problem"
        for sentence in sentences(content)[:40]
        for _, kind in classify_clauses(sentence, "user")
    )


TOOL_LINE = re.compile(r"^\[tool [^\n]*\]$", re.MULTILINE)


TOOL_FILE = re.compile(r"^\[tool (?:Read|Edit|Write|MultiEdit|NotebookEdit): ([^\]\s]+)\]$", re.MULTILINE)


def _tool_files(content: str) -> list[str]:
    """Files a message's Read/Edit/Write calls touched (from the reader's tool descriptors)."""
    if "[tool " not in content:
        return []
    return list(
        dict.fromkeys(m.group(1) for m in TOOL_FILE.finditer(content) if FILE_PATH.fullmatch(m.group(1)))
    )


def _is_narration(sentence: str) -> bool:
    """An assistant sentence that only announces its next step ("Let me check the tests.")."""
    lowered = sentence.lower().replace("’", "'").strip()
    if len(words_of(lowered)) > SHORT_NARRATION_WORDS:
        return False
    return bool(NARRATION.match(lowered)) or bool(
        re.fullmatch(r"(?:good|great|done|ok(?:ay)?|perfect)[.!]?(?: -)?", lowered)
    )


@dataclass
class _Unit:
    text: str
    line: int
    role: str
    message: int  # index in new_messages
    intent: str = "context"
    confidence: float = BASE_CONFIDENCE
    entities: list[dict] = field(default_factory=list)
    words: set[str] = field(default_factory=set)
    normalised: tuple[str, frozenset[str]] = ("", frozenset())
    answered: bool = False
    closes: bool = False  # says that a todo is done (a completed TodoWrite entry, "X is done now")

    def item(self) -> dict:
        out = {
            "type": self.intent,
            "content": self.text,
            "confidence": self.confidence,
            "source_line": self.line,
            "entities": self.entities,
            "answered": self.answered if self.intent == "question" else False,
        }
        if self.closes:
            out["closes"] = True
        return out


@dataclass
class _Known:
    id: int
    intent: str
    text: str
    words: set[str]


class OfflineExtractor:
    """Rule-based extraction; with an embedder, similarity and topic shifts use its vectors."""

    def __init__(self, embedder: Any = None) -> None:
        self.embedder = embedder

    def extract(self, input_obj: dict) -> dict:
        input_obj = _whole_sentences(input_obj)
        new = list(input_obj.get("new_messages") or [])
        project = ((input_obj.get("hierarchy") or {}).get("project") or {}).get("name") or ""
        units, skips = [], []
        # Whether the user's last message reported a problem: then the reply's fixes are solutions.
        earlier = [m for m in input_obj.get("recent_messages") or () if m.get("role") == "user"][-1:]
        answering = bool(earlier) and _reports_problem(str(earlier[0].get("content") or ""))
        before = [m for m in input_obj.get("recent_messages") or () if m.get("role") in ("user", "assistant")]
        speakers = recurring_speakers([*before, *new])
        for index, message in enumerate(new):
            found, reason = self._message_units(index, message, project, answering, speakers)
            previous = new[index - 1] if index else (before[-1] if before else None)
            if message.get("role") == "user" and previous and previous.get("role") == "assistant":
                # A reply that settles the offer before it is that decision; what else it says stays.
                if decided := self._approval(index, message, str(previous.get("content") or ""), project):
                    said = decided[0].words | APPROVAL_WORDS
                    found = decided + [u for u in found if len(u.words - said) >= 2]
            if message.get("role") == "user":
                answering = any(u.intent == "problem" for u in found)
            units.extend(found)
            if not found:
                skips.append({"line": message["line"], "reason": reason})
        known = [
            _Known(
                int(k["id"]),
                str(k.get("type") or ""),
                str(k.get("content") or ""),
                content_words(str(k.get("content") or "")),
            )
            for k in input_obj.get("known_ideas") or ()
            if isinstance(k.get("id"), int)
        ]
        similar = _Similarity(self.embedder, units, known)
        relations = _Relations(units, known, similar).build()
        topic_update, new_span = _topic(input_obj, units, self.embedder)
        return {
            "topic_update": topic_update,
            "new_span": new_span,
            "items": [u.item() for u in units],
            "relations": relations,
            "skip_lines": skips,
        }

    def _approval(self, index: int, message: dict, previous: str, project: str) -> list[_Unit]:
        """A decision unit on the line of a user's reply that settles the offer before it (none
        otherwise, reply_decision): the decision is made on that line; the offer's words are one up."""
        act = reply_decision(str(message.get("content") or ""), previous)
        if act is None:
            return []
        text = BACKTICK.sub(r"\1", act)  # entities read the backticks; content drops them
        return [
            _Unit(
                text=text,
                line=message["line"],
                role="user",
                message=index,
                intent="decision",
                confidence=APPROVAL_CONFIDENCE,
                entities=entities(act, project),
                words=content_words(text),
                normalised=normalise(text),
            )
        ]

    def _message_units(
        self,
        index: int,
        message: dict,
        project: str,
        answering: bool = False,
        speakers: frozenset[str] = frozenset(),
    ) -> tuple[list[_Unit], str]:
        content = str(message.get("content") or "")
        if not content.strip():
            return [], "empty"
        structured: list[_Unit] = []
        if "[/plan]" in content or "[/todos]" in content:
            content, pieces = _structured_blocks(content)
            for text, intent, closes in pieces:
                normalised = normalise(text)
                structured.append(
                    _Unit(
                        text=text,
                        line=message["line"],
                        role=str(message.get("role") or ""),
                        message=index,
                        intent=intent,
                        confidence=0.9,
                        entities=entities(text, project),
                        words=content_words(text),
                        normalised=normalised,
                        closes=closes,
                    )
                )
            if not content.strip():
                return structured, "" if structured else "empty"
        units, reason = self._prose_units(index, message, content, project, answering, speakers)
        return structured + units, "" if structured else reason

    def _prose_units(
        self,
        index: int,
        message: dict,
        content: str,
        project: str,
        answering: bool = False,
        speakers: frozenset[str] = frozenset(),
    ) -> tuple[list[_Unit], str]:
        touched = _tool_files(content)
        speaker, said = speaker_tag(content)
        if speaker in speakers:
            content = said  # "Melanie: ...": who said it is the message's, not the idea's
        stripped = TOOL_LINE.sub("", content)  # "[tool Bash: ls]": what ran is not what was said
        ran_tools, content = stripped != content, stripped
        parts = sentences(content)
        gists = lead_in_lists(content)
        if str(message.get("role") or "") == "assistant":
            # Narration announces the tool call that follows it ("Let me check the tests.") or the
            # text after it ("Now let's build and test:"); elsewhere "let's" may be a plan.
            parts = [p for p in parts if not (_is_narration(p) and (ran_tools or p.rstrip().endswith(":")))]
        texts = _group(parts)
        if not texts:
            texts = _fallback(parts, content)
        if not texts:
            acknowledgement = bool(parts) and all(map(is_smalltalk, parts))
            return [], "acknowledgement" if acknowledgement else "no substantive content"
        units = []
        seen: set[str] = set()
        role = str(message.get("role") or "")
        for marked in texts[:MAX_ITEMS_PER_MESSAGE]:
            planned = PLAN_MARK in marked
            marked = strip_vocative(marked.replace(PLAN_MARK, ""))
            for piece, intent in classify_clauses(marked, role):
                text = BACKTICK.sub(r"\1", piece)  # entities read the backticks; content drops them
                if text.lower() in seen:
                    continue
                seen.add(text.lower())
                normalised = normalise(text)
                field = is_field(text)
                if field and intent == "todo":
                    intent = "context"  # "Depends on: Task 1" names a task, it is not one
                elif planned and intent in ("context", "decision") and not field:
                    intent = "todo"  # a step of a plan, task list or milestone list
                if (
                    answering
                    and role == "assistant"
                    and intent in ("context", "todo", "decision", "problem")
                    and PROPOSED_FIX.search(normalised[0], normalised[1])
                ):
                    intent = "solution"  # the reply to a reported problem says how to fix it
                elif answering and role == "assistant" and intent == "problem":
                    intent = "context"  # the reply restates the user's problem, already remembered
                closes = intent != "question" and bool(DONE_STATEMENT.search(normalised[0]))
                # A line leading into a list keeps the items' heads (lead_in_lists); what it is, how
                # sure, and what it relates to stay those of the line itself.
                listed = with_list(piece, gists)
                units.append(
                    _Unit(
                        text=BACKTICK.sub(r"\1", listed),
                        line=message["line"],
                        role=role,
                        message=index,
                        intent=intent,
                        confidence=confidence(text, intent, normalised),
                        entities=entities(listed, project),
                        words=content_words(listed),
                        normalised=normalised,
                        closes=closes,
                    )
                )
        for unit in units:  # files the message's tool calls touched are what its statements are about
            named = {e["name"].lower() for e in unit.entities}
            unit.entities = (
                unit.entities + [{"name": f, "type": "file"} for f in touched if f.lower() not in named]
            )[:MAX_ENTITIES]
        # Only prose paragraphs merge; lists and separate lines were written as separate points.
        return (units if "\n" in content.strip() else _merge_context(units)), ""


MERGE_CHARS = 320  # a merged context idea stays one readable statement


def _whole_sentences(input_obj: dict) -> dict:
    """The input with each message the protocol cut to its budget (protocol.TRUNCATION_MARK at its
    end) ending at its last whole sentence: the mark is ours, not what was said, and the words
    before it end mid-sentence or mid-word ("…and I've estimat…[truncated 773 chars]"), which made
    memories of half a sentence with the mark in them."""
    out = dict(input_obj)
    for key in ("new_messages", "recent_messages"):
        if input_obj.get(key):
            out[key] = [_uncut(m) for m in input_obj[key]]
    return out


def _uncut(message: dict) -> dict:
    text = str(message.get("content") or "")
    mark = CUT_MARK.search(text)
    if mark is None or mark.end() != len(text.rstrip()):
        return message
    kept = text[: mark.start()]
    end = max(kept.rfind(c) for c in ".!?\n")
    kept = kept[: end + 1] if end >= 0 else kept.rsplit(" ", 1)[0]
    return {**message, "content": kept.rstrip()}


def _merge_context(units: list[_Unit]) -> list[_Unit]:
    """Join adjacent plain-context sentences of one message into one self-contained idea.

    "I'm lucky to have them." alone has lost who "them" is; with its neighbour sentence it is a
    memory. Typed sentences (decisions, problems, questions, todos, ...) stay separate.
    """
    out: list[_Unit] = []
    for unit in units:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.intent == unit.intent == "context"
            and len(prev.text) + len(unit.text) < MERGE_CHARS
        ):
            prev.text = f"{prev.text} {unit.text}"
            prev.words |= unit.words
            prev.confidence = min(prev.confidence, unit.confidence)
            known = {e["name"].lower() for e in prev.entities}
            prev.entities += [e for e in unit.entities if e["name"].lower() not in known]
            prev.normalised = normalise(prev.text)
            continue
        out.append(unit)
    return out


# A field of a structured document ("Depends on: Task 1", "Appetite: small.", "Priority: high"): said
# under a plan it is not a step. It stays a memory of its own (not joined to the next line): "Database:
# Postgres" may be a choice.
FIELD = re.compile(r"^(?P<key>[\w()/ -]{1,30}):\s+(?P<value>[^:]{1,40}?)\s*[.;]?$")
# ... but a label that names what the line is ("TODO: docs", "Fix: pin numpy") makes it a statement
INTENT_LABEL = re.compile(
    r"^(?:(?:the )?(?:fix|solution|workaround|problem|issue|bug|decisions?|plan|todo|to-do|next steps?"
    r"|conclusion|question|conventions?|polic(?:y|ies)|rules?|standards?))$"
)


def is_field(text: str) -> bool:
    match = FIELD.match(BOLD.sub(r"\2", text.replace(PLAN_MARK, "")).strip())
    if not match or len(match.group("key").split()) > 3 or len(match.group("value").split()) > 3:
        return False
    return not INTENT_LABEL.match(match.group("key").strip().lower())


def _group(parts: list[str]) -> list[str]:
    """Drop small talk; join fragments under SHORT_WORDS words to the next sentence (a field, and a
    fragment before one, stays apart)."""
    out: list[str] = []
    pending = ""
    for part in parts:
        if is_smalltalk(part):
            continue
        if is_field(part):
            if pending and (content_words(pending) or entities(pending)):
                out.append(pending)
            out.append(part)
            pending = ""
            continue
        text = f"{pending} {part}".strip() if pending else part
        if len(words_of(text)) < SHORT_WORDS:
            pending = text
            continue
        out.append(text)
        pending = ""
    if pending:
        question = pending.rstrip().endswith("?") and content_words(pending)
        if out and not question and len(out[-1]) + len(pending) < MAX_ITEM_CHARS:
            out[-1] = f"{out[-1]} {pending}"
        elif content_words(pending) or entities(pending):
            out.append(pending)
    return out


def _fallback(parts: list[str], content: str) -> list[str]:
    """Trigger: nothing substantive was found in a message of FALLBACK_WORDS+ words.
    Why: recall matters more than precision; people ask about what was said in passing.
    Outcome: the longest sentence becomes a context item.
    """
    if len(words_of(content)) < FALLBACK_WORDS or not parts:
        return []
    longest = max(range(len(parts)), key=lambda i: (len(parts[i]), -i))
    return [parts[longest][:MAX_ITEM_CHARS]]


# ---------------------------------------------------------------------------------------------
# Similarity and relations


class _Similarity:
    """Cosine over embedder vectors when available, else Jaccard over content words."""

    def __init__(self, embedder: Any, units: list[_Unit], known: list[_Known]) -> None:
        self.units, self.known = units, known
        self.vectors = None
        if embedder is not None and (units or known):
            self.vectors = _embed(embedder, [u.text for u in units] + [k.text for k in known])
        self.match = COSINE_MATCH if self.vectors is not None else JACCARD_MATCH
        self.answer = COSINE_ANSWER if self.vectors is not None else JACCARD_ANSWER

    def unit_unit(self, a: int, b: int) -> float:
        if self.vectors is not None:
            return float(self.vectors[a] @ self.vectors[b])
        return _jaccard(self.units[a].words, self.units[b].words)

    def unit_known(self, a: int, k: int) -> float:
        if self.vectors is not None:
            return float(self.vectors[a] @ self.vectors[len(self.units) + k])
        return _jaccard(self.units[a].words, self.known[k].words)


def _embed(embedder: Any, texts: list[str]) -> Any:
    try:
        return embedder.embed(texts)
    except TotalRecallError as exc:  # EmbeddingError, TransientError
        # Trigger: the embedder failed. Why: extraction must not stop for a similarity hint.
        # Outcome: this batch uses word overlap (or no shift detection) instead.
        log.warning("offline_embed_failed", error=str(exc))
        return None


def _jaccard(a: set[str], b: set[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


_Found = tuple[float, "_Unit | None", "_Known | None"]  # (score, earlier item, known idea)


class _Relations:
    def __init__(self, units: list[_Unit], known: list[_Known], similar: _Similarity) -> None:
        self.units, self.known, self.similar = units, known, similar
        self.out: list[dict] = []

    def add(self, source: _Unit, kind: str, *, target: _Unit | None = None, idea: int | None = None) -> None:
        if target is not None and target.line == source.line:
            return  # both ends on one line: a relation within a message says nothing
        rel = {"from_line": source.line, "from_content": source.text, "to_idea_id": idea, "type": kind}
        rel |= {"to_line": target.line, "to_content": target.text} if target else {"to_line": None}
        if rel not in self.out:
            self.out.append(rel)

    def build(self) -> list[dict]:
        for index, unit in enumerate(self.units):
            lowered, tokens = unit.normalised
            if SUPERSEDES.search(lowered, tokens):
                self._supersedes(index, lowered)
            if CONTRADICTS.search(lowered, tokens):
                self._contradicts(index)
            if BUILDS_ON.match(lowered):
                self._builds_on(index)
            if unit.intent == "solution":
                self._solves(index)
        self._answered_questions()
        self._known_questions()
        return self.out

    def _best(self, index: int, want: Any, bonus: set[str] = frozenset(), fits: Any = None) -> _Found:
        """The most similar earlier unit (other line) or known idea accepted by ``want(intent)``
        (and by ``fits(words, lowered text)`` when given)."""
        best: _Found = (0.0, None, None)
        unit = self.units[index]
        for j in range(index):
            other = self.units[j]
            if other.line != unit.line and want(other.intent):
                if fits is not None and not fits(other.words, other.normalised[0]):
                    continue
                score = self.similar.unit_unit(index, j) + (0.5 if bonus & other.words else 0.0)
                if score >= best[0]:  # later wins ties: the most recent mention
                    best = (score, other, None)
        for k, idea in enumerate(self.known):
            if want(idea.intent):
                if fits is not None and not fits(idea.words, idea.text.lower()):
                    continue
                score = self.similar.unit_known(index, k) + (0.5 if bonus & idea.words else 0.0)
                if score > best[0]:
                    best = (score, None, idea)
        return best

    def _link(self, index: int, kind: str, found: _Found, floor: float) -> bool:
        score, other, idea = found
        if score < floor or (other is None and idea is None):
            return False
        if other is not None:
            self.add(self.units[index], kind, target=other)
        else:
            self.add(self.units[index], kind, idea=idea.id)
        return True

    def _supersedes(self, index: int, lowered: str) -> None:
        """A switch supersedes the earlier statement of what it switched from: "we moved from MySQL
        to Postgres" the decision to use MySQL. Only a statement that says what was replaced, by
        the user or as the assistant's own decision: an assistant's advice ("Instead of SELECT *,
        name the columns", "Replace 'my_api_key' with your key") and a question replace nothing,
        and the earlier statement must name the replaced thing without itself switching from it
        (the same switch said twice is no history). On the BEAM chats 24 of 25 links were advice."""
        unit = self.units[index]
        if unit.intent == "question" or (unit.role != "user" and unit.intent != "decision"):
            return
        old = replaced_terms(lowered)
        if not old:
            return
        family = FAMILY[unit.intent]

        def states_it(words: set[str], text: str) -> bool:
            return bool(old & words) and not old & replaced_terms(text)

        found = self._best(index, lambda intent: FAMILY.get(intent) == family, old, states_it)
        self._link(index, "supersedes", found, self.similar.match)

    def _contradicts(self, index: int) -> None:
        found = self._best(index, lambda intent: intent != "question")
        if self._link(index, "contradicts", found, self.similar.match):
            return
        # Trigger: no clearly similar target. Why: "that's wrong" is usually about what was just
        # said. Outcome: link to the last item of the previous message, if there is one.
        previous = self._previous_message_unit(index)
        if previous is not None:
            self.add(self.units[index], "contradicts", target=previous)

    def _builds_on(self, index: int) -> None:
        previous = self._previous_message_unit(index)
        if previous is not None:
            self.add(self.units[index], "builds_on", target=previous)

    def _previous_message_unit(self, index: int) -> _Unit | None:
        unit = self.units[index]
        earlier = [u for u in self.units[:index] if u.message < unit.message]
        return earlier[-1] if earlier else None

    def _solves(self, index: int) -> None:
        """A solution answers the problem the other side reported in the message just before it
        (the most similar of them), else the batch's or a known problem it is clearly similar to.
        What it answers counts as having a fix (store.insert_relation), so "open problems" leaves it
        out: a fix said to the dashboard's response time must not close the CSRF error said earlier."""
        unit = self.units[index]
        problems = [
            (self.similar.unit_unit(index, j), j)
            for j, other in enumerate(self.units[:index])
            if other.intent == "problem" and other.line != unit.line
        ]
        reported = [
            (score, j)
            for score, j in problems
            if self.units[j].message == unit.message - 1 and self.units[j].role != unit.role
        ]
        if reported or problems:
            score, j = max(reported or problems)  # most similar; among equals the most recent
            if reported or score >= self.similar.match:
                self.add(unit, "answers", target=self.units[j])
                return
        found = self._best(index, lambda intent: intent == "problem")
        self._link(index, "answers", found, self.similar.match)

    def _answered_questions(self) -> None:
        """A question is answered by the next message of the other role that states something."""
        for index, unit in enumerate(self.units):
            if unit.intent != "question":
                continue
            for later in self.units[index + 1 :]:
                if later.message == unit.message:
                    continue
                if later.role == unit.role:
                    break  # the asker went on; the question stays open
                if later.intent != "question":
                    unit.answered = True
                    self.add(later, "answers", target=unit)
                    break

    def _known_questions(self) -> None:
        for k, idea in enumerate(self.known):
            if idea.intent != "question":
                continue
            scored = [
                (self.similar.unit_known(i, k), i) for i, u in enumerate(self.units) if u.intent != "question"
            ]
            if scored:
                score, i = max(scored, key=lambda s: (s[0], -s[1]))
                if score >= self.similar.answer:
                    self.add(self.units[i], "answers", idea=idea.id)


# ---------------------------------------------------------------------------------------------
# Topics


def _topic(input_obj: dict, units: list[_Unit], embedder: Any) -> tuple[dict, dict | None]:
    """topic_update and new_span for the batch.

    Rule: an explicit transition phrase opening a new message ("let's move on to", "anyway,")
    starts a new topic there; "by the way", "quick question" start a sub-span. Failing that, with
    an embedder: the lowest cosine between the two messages before a new message and the two from
    it, below SHIFT_SIM a new topic, below SPAN_SIM a sub-span. Without a shift the current topic
    keeps its name (and gets a summary if it had none); with no current topic the batch names one.
    """
    current = (input_obj.get("hierarchy") or {}).get("topic") or None
    new = list(input_obj.get("new_messages") or [])
    shift = _explicit_shift(new) or _embedding_shift(input_obj, embedder, units)
    if not units:
        # Trigger: nothing extracted. Why: there is nothing to name or summarise.
        # Outcome: an empty update, which keeps the current topic.
        return {"name": "", "summary": ""}, None
    if shift and shift[0] == "topic":
        name, summary = _describe([u for u in units if u.line >= shift[1]] or units)
        return {"name": name, "summary": summary, "start_line": shift[1]}, None
    if current and current.get("name"):
        summary = current.get("summary") or _describe(units)[1]
        update = {"name": current["name"], "summary": summary}
    else:
        name, summary = _describe(units)
        update = {"name": name, "summary": summary}
    if shift:
        name, summary = _describe([u for u in units if u.line >= shift[1]] or units)
        return update, {"name": name, "reason": shift[2], "summary": summary, "start_line": shift[1]}
    return update, None


def _explicit_shift(new: list[dict]) -> tuple[str, int, str] | None:
    for message in new:
        opening = _strip_inline(str(message.get("content") or "").strip()[:120]).lower().replace("’", "'")
        if TOPIC_SHIFT.match(opening):
            return ("topic", message["line"], "explicit topic change")
        if SUB_SPAN.match(opening):
            return ("span", message["line"], "aside: " + SUB_SPAN.match(opening).group(0))
    return None


def _embedding_shift(input_obj: dict, embedder: Any, units: list[_Unit]) -> tuple[str, int, str] | None:
    """Lowest similarity between the two messages before a point and the two from it.

    A new message's vector is the mean of its items' vectors (already embedded for relations, so
    this costs no model call); the two context messages before the batch are embedded directly.
    """
    if embedder is None:
        return None
    recent = list(input_obj.get("recent_messages") or [])[-2:]
    new = list(input_obj.get("new_messages") or [])
    texts = [str(m.get("content") or "")[:WINDOW_CHARS] for m in recent]
    vectors = _embed(embedder, texts + [u.text for u in units])
    if vectors is None:
        return None
    dim = vectors.shape[1]
    import numpy as np

    sequence = [vectors[i] for i in range(len(recent))]
    for index in range(len(new)):
        rows = [len(recent) + j for j, u in enumerate(units) if u.message == index]
        sequence.append(vectors[rows].sum(axis=0) if rows else np.zeros(dim, dtype=np.float32))
    words = [len(words_of(str(m.get("content") or ""))) for m in recent + new]

    def window(lo: int, hi: int):
        v = np.sum(sequence[max(0, lo) : hi], axis=0)
        return v / (float(np.linalg.norm(v)) or 1.0)

    scored = []
    for position in range(max(1, len(recent)), len(sequence)):
        if (
            sum(words[max(0, position - 2) : position]) >= MIN_WINDOW_WORDS
            and sum(words[position : position + 2]) >= MIN_WINDOW_WORDS
        ):
            scored.append((float(window(position - 2, position) @ window(position, position + 2)), position))
    if not scored:
        return None
    sim, position = min(scored)
    line = new[position - len(recent)]["line"]
    if sim < SHIFT_SIM:
        return ("topic", line, "the conversation moved to another subject")
    if sim < SPAN_SIM:
        return ("span", line, "a side subject within the topic")
    return None


SUMMARY_ORDER = {
    "decision": 0,
    "conclusion": 1,
    "solution": 2,
    "problem": 3,
    "todo": 4,
    "context": 5,
    "question": 6,
}
# Words that say what someone does or how, not what the span is about; they end a name phrase.
PHRASE_BREAK = frozenset(
    """doesnt dont isnt wont cant seem seems works work working worked check checking run running
    add added adding fix fixed fixing make made get got set sets setting use used using need needs
    want wants try tried trying still maybe because via please websearch scrolling catches
    looks look looking sure right able whether""".split()
)
NAME_WORDS = 4


def _phrases(text: str) -> list[list[str]]:
    """Runs of content words (no stopwords, verbs of doing, or punctuation inside): noun-phrase-ish."""
    out, run = [], []
    for token in re.findall(r"[A-Za-z0-9][\w.+#/-]*[\w+#]|[A-Za-z0-9]|[^\w\s]", text):
        key = token.lower().replace("’", "'").rstrip(".'")
        breaks = (
            not token[0].isalnum()
            or key in STOPWORDS
            or key in SMALLTALK
            or key in NAME_NOISE
            or key in PHRASE_BREAK
            or key.endswith("ly")
            or key.isdigit()
            or len(key) < 2
        )
        if breaks:
            if run:
                out.append(run)
            run = []
        else:
            run.append(token.rstrip("."))
    if run:
        out.append(run)
    return out


def _describe(units: list[_Unit]) -> tuple[str, str]:
    """(name, summary) of a run of items, both extractive.

    Name: the best noun phrase of the span (a run of content words, at most NAME_WORDS), scored
    by how often its words occur in the span (entities count double), so "Redis session cache"
    beats a list of the four most frequent words from different sentences.
    Summary: the span's decisions and conclusions first (then solutions, problems...), one or two
    statements whose words carry most of that weight; never a score.
    """
    if not units:
        return "", ""
    weights: dict[str, float] = {}
    keys_of: list[set[str]] = []
    phrases: list[tuple[list[str], int]] = []
    for unit in units:
        named = {e["name"].lower() for e in unit.entities if e["type"] != "file"}
        keys: set[str] = set()
        for run in _phrases(unit.text):
            phrases.append((run, len(phrases)))
            for word in run:
                key = word.lower()
                weights[key] = weights.get(key, 0.0) + (2.0 if key in named else 1.0)
                keys.add(key)
        keys_of.append(keys)
    seen_phrases: dict[str, int] = {}
    for run, _ in phrases:
        for size in range(1, min(NAME_WORDS, len(run)) + 1):
            for i in range(len(run) - size + 1):
                key = " ".join(run[i : i + size]).lower()
                seen_phrases[key] = seen_phrases.get(key, 0) + 1
    best: tuple[float, int, str] | None = None
    for run, order in phrases:
        for size in range(min(NAME_WORDS, len(run)), 0, -1):
            for i in range(len(run) - size + 1):
                words = run[i : i + size]
                repeated = seen_phrases[" ".join(words).lower()] if size > 1 else 1
                score = sum(weights[w.lower()] for w in words) * size**-0.35 * (1 + 0.5 * (repeated - 1))
                if size == 1:
                    score *= 0.5 if weights[words[0].lower()] >= 2 else 0.25  # a lone word names little
                candidate = (score, -order, " ".join(words))
                if best is None or candidate[:2] > best[:2]:
                    best = candidate
    name = best[2] if best else " ".join(units[0].text.split()[:4])
    name = (name[:1].upper() + name[1:])[:80]

    def centrality(i: int) -> float:
        return sum(weights.get(k, 0.0) for k in keys_of[i]) / (1 + len(words_of(units[i].text))) ** 0.5

    ranked = sorted(
        range(len(units)), key=lambda i: (SUMMARY_ORDER.get(units[i].intent, 5), -centrality(i), i)
    )
    chosen = [ranked[0]] + [
        i
        for i in ranked[1:2]
        if units[i].text != units[ranked[0]].text and SUMMARY_ORDER.get(units[i].intent, 5) < 5
    ]
    summary = " ".join(units[i].text for i in sorted(chosen))[:MAX_ITEM_CHARS].strip()
    return name, summary
