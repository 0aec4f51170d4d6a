-- 0013: the `supersedes` links the offline extractor made before relations named their ideas (I119)
-- and before only a stated switch superseded (I120) are removed. The executor joined a relation's ends
-- by line (the last idea of one, the first of the other), so a reply's closing "feel free to ask!"
-- superseded the user's request before it, and the extractor linked advice ("Instead of SELECT *, list
-- the columns") to other advice: on the measured chats every such link was wrong. A superseded idea
-- keeps half its score in search, is shown as replaced and leaves the session-start digest. Links an
-- LLM made, and every other relation, stay. Each removal is logged like any other change.

INSERT INTO memory_events (at, kind, object_id, action, old, new, cause)
    SELECT CAST(strftime('%s', 'now') AS REAL), 'relation', r.id, 'delete',
           json_object('from', r.from_id, 'to', r.to_id, 'type', r.relation_type), NULL, 'migration:0013'
    FROM relations r
    WHERE r.relation_type = 'supersedes' AND EXISTS (
        SELECT 1 FROM memory_events e
        WHERE e.kind = 'relation' AND e.object_id = r.id AND e.action = 'insert'
          AND e.cause = 'extract:offline'
          AND json_extract(e.new, '$.from') = r.from_id AND json_extract(e.new, '$.to') = r.to_id);

DELETE FROM relations
    WHERE relation_type = 'supersedes' AND id IN (
        SELECT object_id FROM memory_events WHERE kind = 'relation' AND cause = 'migration:0013');
