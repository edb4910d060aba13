"""Full-duplex agent acceptance: acoustic truth, ledger, scenarios, metrics and gates."""
