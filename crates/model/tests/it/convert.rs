//! OpenAI ⇄ Anthropic conversion.
