"""Quality gates over the landed catalog: benchmark decontamination and
near-duplicate questions. They read records, write their own committed tables under
`<store.out_dir>/quality/`, and never regenerate or change a record."""
