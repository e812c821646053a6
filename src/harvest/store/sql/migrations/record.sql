-- Records a migration as applied.
-- $1: the migration set's name, $2: version, $3: the migration's name
INSERT INTO harvest_schema_migrations (set_name, version, name) VALUES ($1, $2, $3)
