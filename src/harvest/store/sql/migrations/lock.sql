-- Serialises migration runs for the rest of the transaction. The key,
-- 7262917731, is an arbitrary constant.
SELECT pg_advisory_xact_lock(7262917731)
