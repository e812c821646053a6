-- Subscribes the session to harvest_work, the channel work/notify wakes
-- idle workers on.
LISTEN harvest_work
