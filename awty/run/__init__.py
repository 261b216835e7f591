"""One slot's run: the runner and its catch-up, the claims of a run (slotrun, idsrun), the slot
directory reconciled with the store, and the store process a run's store calls go through."""
