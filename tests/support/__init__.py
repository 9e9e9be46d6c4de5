"""What the tests share: fakes of the engine and the worker, servers, media and audio helpers,
the official OpenAI document's validators, typed inputs; no test lives here."""
