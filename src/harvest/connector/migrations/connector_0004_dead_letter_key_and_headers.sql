-- A dead letter keeps the whole message an operator needs to judge it and a
-- replay needs to map it again: the record key (Kafka) and the headers
-- (Kafka headers, SQS string attributes) beside the payload. `headers` is
-- [{"name": text, "value_hex": hex of the value's bytes}, ...] in broker
-- order; rows written before this migration have neither.
ALTER TABLE harvest_connector_dead_letters ADD COLUMN record_key bytea,
  ADD COLUMN headers jsonb;
