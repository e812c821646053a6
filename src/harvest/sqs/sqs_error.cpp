#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include <harvest/sqs/sqs_error.hpp>

namespace harvest::sqs {
namespace {

// "com.amazonaws.sqs#QueueDoesNotExist" -> "QueueDoesNotExist"; the AWS JSON
// protocol also allows a ":<uri>" suffix after the code.
std::string bare_code(std::string_view type) {
  if (auto hash = type.rfind('#'); hash != std::string_view::npos) type = type.substr(hash + 1);
  if (auto colon = type.find(':'); colon != std::string_view::npos) type = type.substr(0, colon);
  return std::string(type);
}

std::string string_field(const nlohmann::json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = j.find(k);
    if (it != j.end() && it->is_string()) return it->get<std::string>();
  }
  return {};
}

}  // namespace

SqsErrorDetail parse_sqs_error(std::string_view body, std::string_view query_error_header) {
  SqsErrorDetail out;
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object()) {
    out.code = bare_code(string_field(j, {"__type", "code", "Code"}));
    out.message = string_field(j, {"message", "Message", "errorMessage"});
  } else {
    std::string_view text = body;
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
      text.remove_suffix(1);
    out.message = text.size() > 300 ? std::string(text.substr(0, 300)) + "..." : std::string(text);
  }
  if (out.code.empty() && !query_error_header.empty()) {
    // "AWS.SimpleQueueService.NonExistentQueue;Sender"
    out.code = std::string(query_error_header.substr(0, query_error_header.find(';')));
  }
  return out;
}

bool is_retryable_sqs_code(std::string_view code) {
  static constexpr std::string_view kRetryable[] = {
      // Throttling, as the AWS SDKs' retry classifiers list it.
      "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottled",
      "RequestThrottledException", "TooManyRequestsException", "RequestLimitExceeded",
      "ProvisionedThroughputExceededException", "BandwidthLimitExceeded", "SlowDown",
      "PriorRequestNotComplete", "EC2ThrottledException", "KmsThrottled", "KMS.ThrottlingException",
      // Temporary service faults.
      "InternalError", "InternalFailure", "ServiceUnavailable", "ServiceUnavailableException",
      "RequestTimeout", "RequestTimeoutException",
      // The queue's in-flight limit (120,000 standard / 20,000 FIFO): it
      // clears as in-flight messages are deleted or time out.
      "OverLimit",
      // Temporary credentials ran out between resolution and use; a retry
      // signs with refreshed ones.
      "ExpiredToken", "ExpiredTokenException", "RequestExpired"};
  return std::find(std::begin(kRetryable), std::end(kRetryable), code) != std::end(kRetryable);
}

Error sqs_error(std::string_view operation, std::string_view target, long http_status,
                std::string_view body, std::string_view query_error_header) {
  SqsErrorDetail d = parse_sqs_error(body, query_error_header);
  std::string message =
      fmt::format("SQS {}{}{}: {}{}{} (HTTP {})", operation, target.empty() ? "" : " on ", target,
                  d.code, d.code.empty() || d.message.empty() ? "" : ": ",
                  d.message.empty() && d.code.empty() ? "no error detail" : d.message, http_status);
  if (d.code == "QueueDoesNotExist" || d.code == "AWS.SimpleQueueService.NonExistentQueue")
    return Error::not_found(std::move(message));
  if (http_status >= 500 || http_status == 429 || http_status == 408 ||
      is_retryable_sqs_code(d.code))
    return Error::transient_error(std::move(message));
  if (http_status >= 400) return Error::bad_request(std::move(message));
  // A non-error status handed here is a protocol surprise, not the caller's fault.
  return Error::internal(std::move(message));
}

}  // namespace harvest::sqs
