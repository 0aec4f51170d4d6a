-- PostgreSQL store, 0006: SQLite's 0013. The `supersedes` links the offline extractor made before
-- relations named their ideas (I119) and before only a stated switch superseded (I120) are removed,
-- each removal logged; links an LLM made, and every other relation, stay.

INSERT INTO memory_events (at, kind, object_id, action, old, new, cause)
    SELECT extract(epoch FROM now()), 'relation', r.id, 'delete',
           json_build_object('from', r.from_id, 'to', r.to_id, 'type', r.relation_type)::text, NULL,
           'migration:0006'
    FROM relations r
    WHERE r.relation_type = 'supersedes' AND EXISTS (
        SELECT 1 FROM memory_events e
        WHERE e.kind = 'relation' AND e.object_id = r.id AND e.action = 'insert'
          AND e.cause = 'extract:offline'
          AND (e.new::json ->> 'from')::bigint = r.from_id AND (e.new::json ->> 'to')::bigint = r.to_id);

DELETE FROM relations
    WHERE relation_type = 'supersedes' AND id IN (
        SELECT object_id FROM memory_events WHERE kind = 'relation' AND cause = 'migration:0006');
