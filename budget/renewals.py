"""The periods after which a grant renews (`veil budget grant --renew`): a name list light enough for the
command line to load without the ledger."""

RENEWALS = ("day", "week", "month")
