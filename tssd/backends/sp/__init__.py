"""The IBM Spectrum Protect backend: tssd talks to an SP server through IBM's client API
library (``libApiTSM64.so``), the way TSS-client does."""
