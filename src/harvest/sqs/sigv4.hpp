// AWS Signature Version 4 (header signing) with OpenSSL HMAC-SHA256.
//
// `sign_v4` is a pure function of the request, the credentials, the scope and
// the clock reading: it returns every intermediate (canonical request, string
// to sign, signature) so tests can check each against the published AWS
// SigV4 test suite, and the full header set to send. Session credentials add
// a signed `X-Amz-Security-Token` header.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <harvest/sqs/credentials.hpp>
#include <harvest/sqs/http_transport.hpp>

namespace harvest::sqs {

struct SigV4Request {
  // "GET", "POST", ...
  std::string method;
  // The Host header value: host, plus ":port" when the URL names one.
  std::string host;
  // Absolute path, not percent-encoded ("/" for SQS).
  std::string path = "/";
  // Query parameters, not percent-encoded, in any order.
  std::vector<std::pair<std::string, std::string>> query;
  // Further headers to sign and send (Content-Type, X-Amz-Target, ...). A
  // header given here is signed with the value given.
  HttpHeaders headers;
  // The exact body bytes.
  std::string_view payload;
};

struct SigV4Signature {
  std::string canonical_request;
  std::string string_to_sign;
  // Lower-case hex HMAC-SHA256.
  std::string signature;
  // The Authorization header value.
  std::string authorization;
  // Every header to send: the request's own, then Host, X-Amz-Date,
  // X-Amz-Security-Token (session credentials only) and Authorization.
  HttpHeaders headers;
};

// Signs `request` for `service` in `region` at time `when`. Host, X-Amz-Date
// and (for session credentials) X-Amz-Security-Token are added to the signed
// headers unless `request.headers` already carries them. Keeps nothing.
[[nodiscard]] SigV4Signature sign_v4(const SigV4Request& request, const AwsCredentials& credentials,
                                     std::string_view region, std::string_view service,
                                     std::chrono::system_clock::time_point when);

// `when` as the SigV4 basic ISO 8601 timestamp, e.g. "20150830T123600Z".
[[nodiscard]] std::string amz_date(std::chrono::system_clock::time_point when);

// Lower-case hex SHA-256 and HMAC-SHA256 (raw 32 bytes) over OpenSSL.
[[nodiscard]] std::string hex_sha256(std::string_view data);
[[nodiscard]] std::string hmac_sha256(std::string_view key, std::string_view data);

}  // namespace harvest::sqs
