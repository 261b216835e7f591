"""The slot tree (``<home>/slots/``): the envelope files that follow the store's pending jobs.
``tree`` (SlotTree: the seam), ``staging`` (what an add writes), ``retire`` (finished slots
leave whole), ``rejected`` (bad files set aside)."""
