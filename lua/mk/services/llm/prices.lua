--- mk.services.llm.prices: USD per million tokens, {input =, output =}, looked up by
--- the longest prefix of the model name ("claude-sonnet-4-5-20250929"
--- matches "claude-sonnet-4-5"). Thinking tokens are billed as output.
--- List prices as published by the vendors (standard tier, short context)
--- when this table was written; edit here, or override per client with
--- `price = {input =, output =}` or in an --llm-config file (`prices = {}`).
return {
  -- OpenAI
  ["gpt-5"] = { input = 1.25, output = 10 },
  ["gpt-5-mini"] = { input = 0.25, output = 2 },
  ["gpt-5-nano"] = { input = 0.05, output = 0.4 },
  ["gpt-4.1"] = { input = 2, output = 8 },
  ["gpt-4.1-mini"] = { input = 0.4, output = 1.6 },
  ["gpt-4.1-nano"] = { input = 0.1, output = 0.4 },
  ["gpt-4o"] = { input = 2.5, output = 10 },
  ["gpt-4o-mini"] = { input = 0.15, output = 0.6 },
  ["o3"] = { input = 2, output = 8 },
  ["o3-mini"] = { input = 1.1, output = 4.4 },
  ["o4-mini"] = { input = 1.1, output = 4.4 },
  -- Google
  ["gemini-2.5-pro"] = { input = 1.25, output = 10 },
  ["gemini-2.5-flash"] = { input = 0.3, output = 2.5 },
  ["gemini-2.5-flash-lite"] = { input = 0.1, output = 0.4 },
  ["gemini-2.0-flash"] = { input = 0.1, output = 0.4 },
  -- Anthropic
  ["claude-opus-4"] = { input = 15, output = 75 },
  ["claude-opus-4-1"] = { input = 15, output = 75 },
  ["claude-sonnet-4"] = { input = 3, output = 15 },
  ["claude-sonnet-4-5"] = { input = 3, output = 15 },
  ["claude-3-7-sonnet"] = { input = 3, output = 15 },
  ["claude-3-5-haiku"] = { input = 0.8, output = 4 },
  ["claude-haiku-4-5"] = { input = 1, output = 5 },
}
