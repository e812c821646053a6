-- Deletes the start claims whose window has lapsed.
DELETE FROM harvest_start_claims WHERE expires_at <= now()
