-- Dead letters keep their broker coordinates structured, so a replay reads
-- them back exactly instead of re-parsing the rendered text:
--   {"kind": "kafka", "topic": ..., "partition": ..., "offset": ...}
--   {"kind": "sqs", "queue_url": ..., "message_id": ...}
-- Existing rows are backfilled from the rendered form ("queue_url#id", split
-- at the last '#', or "topic:partition:offset"). A row whose text is neither
-- keeps NULL, and its replay is refused rather than guessed.
ALTER TABLE harvest_connector_dead_letters ADD COLUMN coordinates_structured jsonb;

UPDATE harvest_connector_dead_letters SET coordinates_structured =
  CASE
    WHEN coordinates ~ '^.+#[^#]+$' THEN jsonb_build_object(
      'kind', 'sqs',
      'queue_url', substring(coordinates FROM '^(.+)#[^#]+$'),
      'message_id', substring(coordinates FROM '#([^#]+)$'))
    WHEN coordinates ~ '^[^#]+:-?[0-9]{1,10}:-?[0-9]{1,19}$'
         AND substring(coordinates FROM ':(-?[0-9]{1,10}):-?[0-9]{1,19}$')::numeric
             BETWEEN 0 AND 2147483647
         AND substring(coordinates FROM ':(-?[0-9]{1,19})$')::numeric
             BETWEEN -9223372036854775808 AND 9223372036854775807
    THEN jsonb_build_object(
      'kind', 'kafka',
      'topic', substring(coordinates FROM '^(.+):-?[0-9]{1,10}:-?[0-9]{1,19}$'),
      'partition', substring(coordinates FROM ':(-?[0-9]{1,10}):-?[0-9]{1,19}$')::int,
      'offset', substring(coordinates FROM ':(-?[0-9]{1,19})$')::bigint)
  END;
