// Translation of SQS error answers into harvest `Error`s: the one place where
// an SQS error code becomes a retry policy.
//
//   throttling codes, HTTP 429 and 5xx, credential expiry  -> kTransient
//   QueueDoesNotExist (and the query-protocol NonExistentQueue) -> kNotFound
//   every other 4xx                                         -> kBadRequest (permanent)
//
// The JSON protocol's error body is `{"__type": "com.amazonaws.sqs#Code",
// "message": "..."}`; ElasticMQ spells the message key `Message`, and some
// errors (a missing X-Amz-Target on ElasticMQ, a proxy's HTML page) have no
// JSON body at all, so both keys and non-JSON bodies are handled.
#pragma once

#include <string>
#include <string_view>

#include <harvest/common/error.hpp>

namespace harvest::sqs {

struct SqsErrorDetail {
  // The bare code ("QueueDoesNotExist"), or "" when the body names none.
  std::string code;
  std::string message;
};

// Reads code and message out of an error body. `query_error_header` is the
// x-amzn-query-error header ("AWS.SimpleQueueService.NonExistentQueue;Sender"),
// used when the body names no code.
[[nodiscard]] SqsErrorDetail parse_sqs_error(std::string_view body,
                                             std::string_view query_error_header = {});

// Whether `code` is one AWS uses for throttling or a temporary service fault.
[[nodiscard]] bool is_retryable_sqs_code(std::string_view code);

// The Error for a non-2xx answer to `operation` ("ReceiveMessage") on
// `target` (queue URL or name, may be empty). The message names the
// operation, the target, the code, the service's message and the status.
[[nodiscard]] Error sqs_error(std::string_view operation, std::string_view target, long http_status,
                              std::string_view body, std::string_view query_error_header = {});

}  // namespace harvest::sqs
