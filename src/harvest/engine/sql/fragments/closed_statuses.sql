-- The closed statuses as a list, for `status IN` / `status NOT IN` (see
-- is_closed_status in types.hpp).
('completed', 'failed', 'cancelled', 'terminated')
