"""H. Li's thesis (RPI 2024), chapters 2 and 4 (spec 001): a shallow ViT on the pattern data model
(sample complexity against α*, σ; the frozen-attention CNN; attention concentration; token
sparsification) and a one-hidden-layer sigmoid network on a Gaussian mixture with group imbalance."""
