// Credential redaction: the one function every log line, error, health
// answer and CLI output passes configuration text through before showing it.
//
// `redact_secrets` replaces with "***" the value of:
// - URL userinfo passwords (`scheme://user:secret@host`);
// - `password`, `sslpassword`, `passfile`-less keyword conninfo entries
//   (`password=secret`, `password='se cret'`) and the same names as URL query
//   parameters (`?password=secret&...`);
// - AWS secrets: `aws_secret_access_key` / `aws_session_token` entries,
//   `X-Amz-Security-Token` / `X-Amz-Signature` parameters, and the
//   `Signature=` part of a SigV4 `Authorization` header;
// - `Authorization: Bearer ...` tokens.
// Everything else is kept, so the text still tells an operator which host,
// user and database it is about.
#pragma once

#include <string>
#include <string_view>

namespace harvest {

[[nodiscard]] std::string redact_secrets(std::string_view text);

}  // namespace harvest
