"""The read-side queries of search: candidates by words, names and time, and the rows that rank
and render them.

The storage owner of search's SQL (DESIGN.md "Where SQL lives"); `search.py` keeps the ranking
(fusion, weights, reranking) and calls these named reads. Vector KNN is `vectors.knn`'s. Ids
and scores come back as plain values, rows as dicts or sqlite3.Row (by column name).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from total_recall import memories, state, transcript
from total_recall.db import Database

# What BM25 ranks for each kind of unit: its FTS5 table, the table it indexes, and which rows.
FTS = {
    "idea": ("ideas_fts", "ideas", ""),
    "span": ("spans_fts", "spans", " AND o.depth > 0"),  # topics, not whole sessions
    "chunk": ("chunks_fts", "chunks", ""),
}
# Full-text tables that also index each row's project key (migrations 0010, 0011), with their text
# columns: a query's words are matched in those only, and bm25() weighs the key column 0.
KEYED = {"ideas_fts": ("content",), "chunks_fts": ("content", "context"), "spans_fts": ("name", "summary")}


def project_key(project: str) -> str:
    """The one token 0010 and 0011 index for a project: its UTF-8 bytes in hex (`lower(hex(project))`)."""
    return project.encode("utf-8").hex()


def keyed_match(fts: str, match: str, project: str | None = None) -> str:
    """An FTS5 query over a KEYED table: `match` in its text columns only, and with `project`, ANDed
    with that project's key."""
    out = f"{{{' '.join(KEYED[fts])}}} : ({match})"
    return f'{out} AND {{project_key}} : "{project_key(project)}"' if project else out


def _only_project(db: Database, owner: str, project: str) -> bool:
    """Whether every row of `owner` is of this project (three index seeks)."""
    return not db.one(
        f"SELECT EXISTS (SELECT 1 FROM {owner} WHERE project IS NULL) "
        f"OR EXISTS (SELECT 1 FROM {owner} WHERE project < ?) "
        f"OR EXISTS (SELECT 1 FROM {owner} WHERE project > ?) AS other",
        (project, project),
    )["other"]


def marks(values) -> str:
    """'?,?,?' for an IN (...) list of these values."""
    return ",".join("?" * len(values))


def _project_sql(projects: list[str] | None, column: str) -> tuple[str, tuple]:
    """The filter to these projects (None: every project) and its parameters."""
    if projects is None:
        return "", ()
    return f" AND {column} IN ({marks(projects)})", tuple(projects)


def _time_sql(since: str | None, until: str | None, column: str) -> tuple[str, tuple]:
    """The filter to since <= time < until (ISO seconds; either may be None) and its parameters."""
    sql, params = "", ()
    if since:
        sql, params = sql + f" AND substr({column}, 1, 19) >= ?", params + (since,)
    if until:
        sql, params = sql + f" AND substr({column}, 1, 19) < ?", params + (until,)
    return sql, params


# -- names the user types -------------------------------------------------------------------------


def sessions(db: Database) -> set[str]:
    """Every session id that was indexed or has spans."""
    return set(
        db.column(
            "SELECT DISTINCT session_id FROM index_state WHERE session_id IS NOT NULL UNION "
            "SELECT DISTINCT session_id FROM spans WHERE session_id IS NOT NULL"
        )
    )


def projects(db: Database) -> list[str]:
    """Every project with memories or indexed transcripts: a loose index scan (one seek per
    project, not a scan of all ideas)."""
    return db.column(
        "WITH RECURSIVE p(x) AS (SELECT min(project) FROM ideas UNION ALL "
        "SELECT (SELECT min(project) FROM ideas WHERE project > x) FROM p WHERE x IS NOT NULL) "
        "SELECT x FROM p WHERE x IS NOT NULL "
        "UNION SELECT DISTINCT project FROM index_state WHERE project IS NOT NULL"
    )


# -- candidates -----------------------------------------------------------------------------------


def bm25(
    db: Database,
    kind: str,
    match: str,
    projects: list[str] | None,
    limit: int,
    weights: str | None = None,
) -> list[tuple[int, float]]:
    """(id, BM25 score as a positive number) of the ideas, topics or chunks an FTS5 query matches,
    best first; `weights` are bm25()'s column weights (the default rank when None)."""
    fts, owner, extra = FTS[kind]
    psql, pparams = _project_sql(projects, "o.project")
    if db.dialect == "postgres":
        return _ts_rank(db, owner, match, psql + extra, pparams, limit)
    rank = f"bm25({fts}, {weights})" if weights else "f.rank"
    match, keyed, psql, pparams = _fts_scope(db, kind, match, projects, psql, pparams)
    if keyed:
        # bm25() over the matches costs less than FTS5's sorted `rank` (§3); the key weighs 0
        rank = f"bm25({fts}, {weights or ', '.join('1.0' for _ in KEYED[fts])}, 0.0)"
    column, source = _fts_source(kind, psql)
    rows = db.all(
        f"SELECT {column} AS id, {rank} AS r FROM {source} ORDER BY r LIMIT ?", (match, *pparams, limit)
    )
    return [(r["id"], -float(r["r"])) for r in rows]


def says(db: Database, kind: str, match: str, projects: list[str] | None) -> bool:
    """Whether any idea, topic or chunk (of these projects) holds a word of the FTS5 query: the first
    match found, none ranked (bm25() ranks every match of a common word before its LIMIT)."""
    _fts, owner, extra = FTS[kind]
    psql, pparams = _project_sql(projects, "o.project")
    if db.dialect == "postgres":
        sql = f"SELECT EXISTS (SELECT 1 FROM {owner} o, {PG_ANY_WORD} WHERE o.fts @@ w.q{psql}{extra}) AS hit"
        return bool(db.one(sql, (_pg_words(match), *pparams))["hit"])
    match, _keyed, psql, pparams = _fts_scope(db, kind, match, projects, psql, pparams)
    _column, source = _fts_source(kind, psql)
    return bool(db.one(f"SELECT EXISTS (SELECT 1 FROM {source}) AS hit", (match, *pparams))["hit"])


def _fts_scope(
    db: Database, kind: str, match: str, projects: list[str] | None, psql: str, pparams: tuple
) -> tuple[str, bool, str, tuple]:
    """An FTS5 query's scope: (match, whether the key inside it scopes it, project filter, its
    parameters).

    Trigger: a search scoped to one project. Why: FTS5 ranks every row a MATCH yields before SQL
    filters them, so the other projects' matches were ranked and each looked up in its owner row only
    to be dropped (at 1M ideas, 20 projects: 55 ms a query). Outcome: over a KEYED table the
    project's key is ANDed inside the MATCH and only its rows are ranked (10 ms), the same scores;
    when it is the only project, no filter at all. Several projects keep the join."""
    fts, owner, _extra = FTS[kind]
    if fts not in KEYED:
        return match, False, psql, pparams
    one = projects[0] if projects is not None and len(projects) == 1 and projects[0] else None
    match = keyed_match(fts, match, one if one and not _only_project(db, owner, one) else None)
    if projects is None or one:
        return match, True, "", ()
    return match, False, psql, pparams


def _fts_source(kind: str, psql: str) -> tuple[str, str]:
    """(the id column, the FROM ... WHERE ... MATCH ? clause) of an FTS5 query over `kind`. Every
    project: the owner row filters nothing, and joining it for every match (before the sort) cost
    more than the ranking; the triggers keep the index and owners in step."""
    fts, owner, extra = FTS[kind]
    if not psql and not extra:
        return "f.rowid", f"{fts} f WHERE {fts} MATCH ?"
    return "o.id", f"{fts} f JOIN {owner} o ON o.id = f.rowid WHERE {fts} MATCH ?{psql}{extra}"


# PostgreSQL: the generated tsvector (GIN), the words OR-ed like the FTS5 query, ranked as BM25 ranks:
# each word's ts_rank (normalised by the text's length, as BM25 weighs a long text down) times its
# inverse document frequency. A chunk's context has weight D (0.3, as bm25's context column), its
# words A (1.0).
PG_RANK_WEIGHTS = "'{0.3, 0.1, 0.1, 1.0}'"
PG_RANK_NORMALISATION = 1  # ts_rank's: divide by 1 + log(the text's length in words)


# An FTS5 OR query's words as a PostgreSQL tsquery `w.q` (one `?`: _pg_words of the query).
# Punctuation splits words, as in the tsvector columns (postgres/0003) and FTS5's unicode61.
# PG_ONE_WORD: the words of one `?` as a tsquery of their lexemes (AND-ed: a word such as mix_audit).
PG_ONE_WORD = "plainto_tsquery('english', regexp_replace(?, '[[:punct:]]+', ' ', 'g'))"
PG_ANY_WORD = f"(SELECT replace({PG_ONE_WORD}::text, '&', '|')::tsquery AS q) w"


def _pg_words(match: str) -> str:
    """The words of an FTS5 OR of quoted literals (query.any_of), for PG_ANY_WORD."""
    return " ".join(w.strip('"') for w in match.split(" OR "))


def _ts_rank(
    db: Database, owner: str, match: str, where: str, params: tuple, limit: int
) -> list[tuple[int, float]]:
    """bm25()'s PostgreSQL form: (id, score), best first.

    Trigger: a full-text strategy on the PostgreSQL store. Why: ts_rank_cd counts every query word
    alike and does not weigh a long text down, so a window repeating a common word ("project",
    "test") outranked the short line holding the rare one; BM25 over the same memories found more
    (sessions set, tune split: recall@1 0.371 with ts_rank_cd against 0.450 on SQLite). Outcome:
    each of the query's words (stemmed, stopwords dropped; two words of one stem count twice, as in
    FTS5's OR of both) adds idf(word) * ts_rank(text, word), BM25's idf over the texts the query
    matches in its scope: a word every match holds tells them apart by nothing. Tune split on the
    PostgreSQL store: sessions recall@1 0.371 -> 0.425, locomo-roles recall@10 0.728 -> 0.817, BEAM
    0.564 -> 0.628; and it takes less time than ts_rank_cd (one ts_rank per text and word). The idf
    over the table's rows (the planner's estimate) changed the ranking whenever autovacuum analysed
    the table, and was no better (locomo-roles 0.793, sessions recall@1 0.403)."""
    words = list(dict.fromkeys(_pg_words(match).split()))
    if not words:
        return []
    each = "ARRAY[" + ", ".join([PG_ONE_WORD] * len(words)) + "]::tsquery[]"
    sql = (
        f"WITH w AS (SELECT q FROM {PG_ANY_WORD}), "
        f"t AS (SELECT x.q, x.i FROM unnest({each}) WITH ORDINALITY AS x(q, i) WHERE numnode(x.q) > 0), "
        f"m AS (SELECT o.id, o.fts FROM {owner} o, w WHERE o.fts @@ w.q{where}), "
        # each (text, word) pair ranked once: 0 where the text lacks the word (a word of several
        # lexemes, such as mix_audit, needs them all); one @@ test fewer than joining on it
        "p AS (SELECT m.id, t.i, CASE WHEN numnode(t.q) = 1 OR m.fts @@ t.q "
        f"THEN ts_rank({PG_RANK_WEIGHTS}, m.fts, t.q, {PG_RANK_NORMALISATION}) ELSE 0 END AS r FROM m, t), "
        "df AS (SELECT i, count(*) FILTER (WHERE r > 0)::float8 AS n FROM p GROUP BY i), "
        "total AS (SELECT count(*)::float8 AS n FROM m) "
        "SELECT p.id, sum(ln(1 + (total.n - df.n + 0.5) / (df.n + 0.5)) * p.r) AS r "
        "FROM p JOIN df ON df.i = p.i, total GROUP BY p.id ORDER BY r DESC, p.id LIMIT ?"
    )
    rows = db.all(sql, (" ".join(words), *words, *params, limit))
    return [(r["id"], float(r["r"])) for r in rows]


def lines_matching(db: Database, match: str, projects: list[str] | None, limit: int) -> list:
    """Up to `limit` chunks (content, role, seq) an FTS query matches, in no particular order: a
    sample of the lines that say some words, without ranking every match (search.participants)."""
    psql, pparams = _project_sql(projects, "o.project")
    if db.dialect == "postgres":
        return db.all(
            f"SELECT o.content, o.role, o.seq FROM chunks o, {PG_ANY_WORD} WHERE o.fts @@ w.q{psql} LIMIT ?",
            (_pg_words(match), *pparams, limit),
        )
    return db.all(
        "SELECT o.content, o.role, o.seq FROM chunks_fts f JOIN chunks o ON o.id = f.rowid "
        f"WHERE chunks_fts MATCH ?{psql} LIMIT ?",
        (keyed_match("chunks_fts", match), *pparams, limit),
    )


def rare_entities(db: Database, names: list[str], max_links: int) -> list[int]:
    """Ids of the (non-project) entities with one of these names that at most `max_links`
    ideas mention."""
    # Names match whatever their case: SQLite's column is COLLATE NOCASE; PostgreSQL's unique
    # index is on lower(name) (postgres/0002).
    if db.dialect == "postgres":
        where = f"lower(e.name) IN ({','.join('lower(?)' for _ in names)})"
    else:
        where = f"e.name IN ({marks(names)})"
    return db.column(
        f"SELECT e.id FROM entities e JOIN idea_entities ie ON ie.entity_id = e.id WHERE {where} "
        f"AND e.type != 'project' GROUP BY e.id HAVING count(*) <= ?",
        (*names, max_links),
    )


def ideas_sharing_entities(
    db: Database, idea_id: int, intents: list[str], max_links: int, shared: int, limit: int
) -> list[int]:
    """Ids of the other ideas of these intents, in the idea's project, that name at least `shared` of
    the entities the idea names (not projects, and only those at most `max_links` ideas name)."""
    entities = db.column(
        "SELECT ie.entity_id FROM idea_entities ie JOIN entities e ON e.id = ie.entity_id "
        "WHERE ie.idea_id = ? AND e.type != 'project' "
        "AND (SELECT count(*) FROM idea_entities x WHERE x.entity_id = ie.entity_id) <= ?",
        (idea_id, max_links),
    )
    if len(entities) < shared:
        return []
    return db.column(
        f"SELECT ie.idea_id FROM idea_entities ie JOIN ideas i ON i.id = ie.idea_id "
        f"WHERE ie.entity_id IN ({marks(entities)}) AND i.intent IN ({marks(intents)}) AND i.id != ? "
        "AND i.project = (SELECT project FROM ideas WHERE id = ?) "
        "GROUP BY ie.idea_id HAVING count(*) >= ? ORDER BY ie.idea_id DESC LIMIT ?",
        (*entities, *intents, idea_id, idea_id, shared, limit),
    )


def ideas_naming(db: Database, entity_ids: list[int], projects: list[str] | None, limit: int) -> list[int]:
    """Ids of the newest ideas (of these projects) that mention one of these entities."""
    psql, pparams = _project_sql(projects, "i.project")
    return db.column(
        f"SELECT i.id FROM idea_entities ie JOIN ideas i ON i.id = ie.idea_id "
        f"WHERE ie.entity_id IN ({marks(entity_ids)}){psql} ORDER BY i.id DESC LIMIT ?",
        (*entity_ids, *pparams, limit),
    )


# The lines a "where did we leave off" recap is made of: what the user and Claude said, and Claude
# Code's summary of the turns before a compaction; not tool output or text Claude Code added.
RECAP_KINDS = ("prompt", "response", "compact_summary")


def latest_session(db: Database, projects: list[str] | None, excluding: str | None) -> Any:
    """The session (other than `excluding`) with the newest line of these projects (None: of any):
    session_id, project, ended; or None. One index seek per project."""
    other, params = (" AND session_id != ?", (excluding,)) if excluding else ("", ())
    sql = (
        "SELECT session_id, project, timestamp AS ended FROM chunks WHERE session_id IS NOT NULL "
        f"AND timestamp IS NOT NULL{other}{{project}} ORDER BY timestamp DESC LIMIT 1"
    )
    if projects is None:
        return db.one(sql.format(project=""), params)
    found = [db.one(sql.format(project=" AND project = ?"), (*params, p)) for p in projects]
    return max((r for r in found if r is not None), key=lambda r: r["ended"], default=None)


def pull_request_session(db: Database, projects: list[str] | None, number: int) -> Any:
    """The latest session of these projects (None: of any) that opened pull request `number` (its PR
    link line, transcript.PR_LINK): session_id, project; or None."""
    psql, pparams = _project_sql(projects, "project")
    return db.one(
        "SELECT session_id, project FROM messages WHERE skip_reason = 'pr_link' AND session_id IS NOT NULL "
        f"AND content LIKE ?{psql} ORDER BY timestamp DESC LIMIT 1",
        (transcript.pr_link_head(number) + "%", *pparams),
    )


# A response line that is only a tool call ("[tool Read: app.js]") says what ran, not what was said.
_NOT_A_CALL = f" AND substr(content, 1, {len(transcript.TOOL_CALL)}) != ?"


def latest_lines(db: Database, session: str, limit: int) -> list[int]:
    """Ids of the chunks of a session's last RECAP_KINDS lines (not a bare tool call), the newest first."""
    return db.column(
        f"SELECT id FROM chunks WHERE session_id = ? AND kind IN ({marks(RECAP_KINDS)}){_NOT_A_CALL} "
        "ORDER BY timestamp DESC, source_line DESC, seq DESC LIMIT ?",
        (session, *RECAP_KINDS, transcript.TOOL_CALL, limit),
    )


def lines_between(
    db: Database, projects: list[str] | None, since: str | None, until: str | None, limit: int
) -> list[int]:
    """Ids of the chunks of the newest RECAP_KINDS lines (of these projects, not a bare tool call)
    said in since..until (ISO seconds)."""
    psql, pparams = _project_sql(projects, "project")
    tsql, tparams = _time_sql(since, until, "timestamp")
    return db.column(
        f"SELECT id FROM chunks WHERE kind IN ({marks(RECAP_KINDS)}){_NOT_A_CALL}{psql}{tsql} "
        "ORDER BY timestamp DESC, source_line DESC, seq DESC LIMIT ?",
        (*RECAP_KINDS, transcript.TOOL_CALL, *pparams, *tparams, limit),
    )


def ideas_between(
    db: Database, projects: list[str] | None, since: str | None, until: str | None, limit: int
) -> list[int]:
    """Ids of the newest ideas (of these projects) said in since..until (ISO seconds)."""
    psql, pparams = _project_sql(projects, "project")
    tsql, tparams = _time_sql(since, until, "message_time")
    return db.column(
        f"SELECT id FROM ideas WHERE 1 = 1{psql}{tsql} ORDER BY message_time DESC LIMIT ?",
        (*pparams, *tparams, limit),
    )


def ideas_of_kind(
    db: Database,
    projects: list[str] | None,
    intents: Iterable[str],
    open_only: bool,
    limit: int,
    since: str | None = None,
    until: str | None = None,
) -> list[int]:
    """Ids of the newest ideas (of these projects, said in since..until) of these kinds; with
    open_only, neither an answered question, a problem a solution answered, nor a closed todo."""
    kinds = sorted(intents)
    psql, pparams = _project_sql(projects, "project")
    tsql, tparams = _time_sql(since, until, "message_time")
    osql = f" AND {memories.OPEN}" if open_only else ""
    return db.column(
        f"SELECT id FROM ideas WHERE intent IN ({marks(kinds)}){psql}{tsql}{osql} "
        "ORDER BY message_time DESC, id LIMIT ?",
        (*kinds, *pparams, *tparams, limit),
    )


# -- rows to rank and show ------------------------------------------------------------------------


def rows_by_id(db: Database, table: str, columns: tuple, ids: list[int]) -> dict[int, dict]:
    """id -> {column: value} of these rows of ideas, spans or chunks (`columns` starts with id)."""
    if not ids:
        return {}
    rows = db.all(f"SELECT {state.select_list(table, columns)} FROM {table} WHERE id IN ({marks(ids)})", ids)
    if not rows:
        return {}
    names = rows[0].keys()  # zipped: dict(row) looks every column up by name (twice the time)
    return {r[0]: dict(zip(names, r)) for r in rows}


def superseding(db: Database, ids: list[int]) -> list:
    """The supersedes relations onto these ideas, newest superseding idea first: to_id, from_id."""
    return db.all(
        f"SELECT to_id, from_id FROM relations WHERE relation_type = 'supersedes' "
        f"AND to_id IN ({marks(ids)}) ORDER BY from_id DESC",
        ids,
    )


def relations_onto(db: Database, ids: list[int], types: tuple[str, ...]) -> list:
    """Relations of these types pointing at these ideas: from_id, to_id, relation_type."""
    return db.all(
        f"SELECT from_id, to_id, relation_type FROM relations WHERE to_id IN ({marks(ids)}) "
        f"AND relation_type IN ({marks(types)})",
        (*ids, *types),
    )


def _pairs(places) -> tuple[str, list]:
    """A VALUES list of (file, line) places and its parameters: one index probe per place (an IN
    list of files times an IN list of lines probed every combination, ~40x more at 60 places)."""
    ordered = sorted(places)
    return ", ".join(["(?, ?)"] * len(ordered)), [v for pair in ordered for v in pair]


def chunk_texts(db: Database, places) -> list:
    """The chunks on these (file, line) places, in window order: source_file, source_line, content,
    context, role."""
    values, params = _pairs(places)
    return db.all(
        f"WITH w (f, l) AS (VALUES {values}) SELECT p.path AS source_file, c.source_line, "
        "c.content, c.context, c.role FROM w JOIN files p ON p.path = w.f "
        "JOIN chunks c ON c.file_id = p.id AND c.source_line = w.l ORDER BY c.seq",
        params,
    )


def ideas_on(db: Database, places) -> list:
    """The ideas said on these (file, line) places: id, source_file, source_line, content."""
    values, params = _pairs(places)
    return db.all(
        f"WITH w (f, l) AS (VALUES {values}) SELECT i.id, p.path AS source_file, s.source_line, i.content "
        "FROM w JOIN files p ON p.path = w.f JOIN idea_sources s ON s.file_id = p.id AND s.source_line = w.l "
        "JOIN ideas i ON i.id = s.idea_id",
        params,
    )


def sources(db: Database, ids: list[int]) -> list:
    """Every place these ideas were said, oldest first: idea_id, source_file, source_line,
    message_time, machine."""
    return db.all(
        f"SELECT idea_id, {state.path_of('idea_sources')}, source_line, message_time, machine FROM "
        "idea_sources "
        f"WHERE idea_id IN ({marks(ids)}) ORDER BY message_time, source_line",
        ids,
    )


def entity_names(db: Database, ids: list[int]) -> list:
    """The entities these ideas mention, by name: idea_id, name."""
    return db.all(
        f"SELECT ie.idea_id, e.name FROM idea_entities ie JOIN entities e ON e.id = ie.entity_id "
        f"WHERE ie.idea_id IN ({marks(ids)}) ORDER BY e.name",
        ids,
    )


def relations_of(db: Database, ids: list[int]) -> list[Any]:
    """Relations from or to these ideas with both ends' text: from_id, to_id, relation_type,
    from_text, to_text."""
    return db.all(
        f"SELECT r.from_id, r.to_id, r.relation_type, f.content AS from_text, t.content AS to_text "
        f"FROM relations r JOIN ideas f ON f.id = r.from_id JOIN ideas t ON t.id = r.to_id "
        f"WHERE r.from_id IN ({marks(ids)}) OR r.to_id IN ({marks(ids)})",
        ids + ids,
    )
