-- Subscribes the session to harvest_work, the channel idle workers are woken
-- on. Notifications on it are sent only through fragments/notify_work.sql;
-- the name is written here a second time because LISTEN takes an identifier
-- where pg_notify takes a string: the two must match.
LISTEN harvest_work
