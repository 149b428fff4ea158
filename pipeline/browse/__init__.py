"""The auditor's record browser (`curriculum browse`): runs, records, one record's evidence,
KG path, rollouts, verifier samples and gate verdicts, and reviews that reach the export."""
