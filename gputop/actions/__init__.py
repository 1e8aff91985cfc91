"""Actions on the cluster: pure plans and the executor that runs them, audited."""
