-- PostgreSQL store, 0002: entity names are unique whatever their case, as SQLite's
-- `name COLLATE NOCASE UNIQUE` makes them (0001 made them unique by exact text, so "Redis" and
-- "redis" were two entities on PostgreSQL and one on SQLite). No ICU or citext in every build:
-- a unique index on lower(name), which store.upsert_entity and lookup.rare_entities use.
-- Names that differ only by case merge into the oldest entity, keeping every idea's link.

CREATE TEMP TABLE entity_keep ON COMMIT DROP AS
    SELECT id, min(id) OVER (PARTITION BY lower(name)) AS keep FROM entities;

INSERT INTO idea_entities (idea_id, entity_id)
    SELECT ie.idea_id, k.keep FROM idea_entities ie JOIN entity_keep k ON k.id = ie.entity_id
    WHERE k.id <> k.keep
    ON CONFLICT DO NOTHING;

DELETE FROM entities e USING entity_keep k WHERE e.id = k.id AND k.id <> k.keep;

ALTER TABLE entities DROP CONSTRAINT entities_name_key;
CREATE UNIQUE INDEX entities_name_nocase ON entities (lower(name));
