"""The store seam: ``base.Store`` is the contract, ``sqlite.SQLiteStore`` the embedded default."""
