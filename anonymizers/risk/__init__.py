"""Re-identification risk of a released table: the simulated attack of [D] ch. 4 and the classic measures."""
