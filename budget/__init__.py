"""Privacy budgets: privacy-loss arithmetic, composition and the epsilon ledger."""
