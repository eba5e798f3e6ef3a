"""The embedded demo: an SGLang-shaped fixture repository mined, validated and evaluated end to end."""
