-- Installed firmware and power state as a component manager last read them
-- back (issue 12); NULL = never observed (the value is as imported).
ALTER TABLE component ADD COLUMN firmware_observed_at TIMESTAMPTZ;
ALTER TABLE component ADD COLUMN power_observed_at TIMESTAMPTZ;
