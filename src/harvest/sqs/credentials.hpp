// AWS credentials and the standard provider chain (SQS-3).
//
// `DefaultCredentialsChain` tries, in order, the first source that is
// configured wins:
//   1. environment: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN)
//   2. profile: aws_access_key_id / aws_secret_access_key / aws_session_token of
//      the active profile in the shared credentials and config files
//   3. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (or the
//      profile's web_identity_token_file + role_arn) exchanged through STS
//      AssumeRoleWithWebIdentity
//   4. container: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI / _FULL_URI with
//      AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE) (ECS, EKS pod identity)
//   5. EC2 instance metadata, IMDSv2 (session token PUT, role name, role
//      credentials); AWS_EC2_METADATA_SERVICE_ENDPOINT overrides the address,
//      AWS_EC2_METADATA_DISABLED=true skips it.
// A source that is configured but fails stops the chain with its error (a
// broken container endpoint must not silently fall through to another
// identity). Expiring credentials are cached and refreshed ahead of expiry.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <harvest/common/error.hpp>

namespace harvest::sqs {

class HttpTransport;

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  // Empty for long-term keys; sent as X-Amz-Security-Token otherwise.
  std::string session_token;
  // When temporary credentials stop working; nullopt for long-term keys.
  std::optional<std::chrono::system_clock::time_point> expiration;
  // Which source produced them ("environment", "profile default", ...), for
  // logs and error messages. Never the secret.
  std::string source;
};

// Thread-safe source of credentials to sign with. Held by `shared_ptr`
// because one provider is shared by every client built from it.
class CredentialsProvider {
 public:
  virtual ~CredentialsProvider() = default;
  // Credentials valid now. Errors: kConfig when no source is configured or a
  // source is misconfigured, kTransient when a source is unreachable.
  [[nodiscard]] virtual Result<AwsCredentials> credentials() = 0;
  // Forgets cached credentials (the service called them expired), so the
  // next `credentials()` resolves afresh.
  virtual void invalidate() {}
};

// Fixed credentials, e.g. "x"/"x" for a local emulator.
class StaticCredentialsProvider final : public CredentialsProvider {
 public:
  explicit StaticCredentialsProvider(AwsCredentials credentials)
      : credentials_(std::move(credentials)) {}
  StaticCredentialsProvider(std::string access_key_id, std::string secret_access_key,
                            std::string session_token = {});
  [[nodiscard]] Result<AwsCredentials> credentials() override { return credentials_; }

 private:
  AwsCredentials credentials_;
};

struct CredentialChainOptions {
  // Profile to read. Default: AWS_PROFILE, else "default".
  std::optional<std::string> profile;
  // STS endpoint for web identity. Default: AWS_ENDPOINT_URL_STS, else
  // AWS_ENDPOINT_URL, else https://sts.<region>.amazonaws.com (the global
  // https://sts.amazonaws.com without a region).
  std::optional<std::string> sts_endpoint;
  // Region for STS. Default: AWS_REGION, AWS_DEFAULT_REGION, profile.
  std::optional<std::string> region;
  // Connect / total timeouts for the metadata and STS endpoints. These are
  // on the path of the first signed call, so they are short. Defaults 1 s / 5 s.
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds timeout{5000};
  // Temporary credentials are refreshed this long before they expire.
  // Default 5 min.
  std::chrono::seconds refresh_margin{300};
};

// One source of the chain. nullopt: the source is not configured here (the
// chain moves on). An error: it is configured but failed (the chain stops).
using CredentialsLookup = Result<std::optional<AwsCredentials>>;

[[nodiscard]] CredentialsLookup credentials_from_environment();
[[nodiscard]] CredentialsLookup credentials_from_profile(const CredentialChainOptions& options);
[[nodiscard]] CredentialsLookup credentials_from_web_identity(
    HttpTransport& http, const CredentialChainOptions& options);
[[nodiscard]] CredentialsLookup credentials_from_container(HttpTransport& http,
                                                           const CredentialChainOptions& options);
[[nodiscard]] CredentialsLookup credentials_from_imds(HttpTransport& http,
                                                      const CredentialChainOptions& options);

// The standard chain (see the top of this file). Resolves lazily, on the
// first `credentials()`; caches the result; re-resolves once temporary
// credentials are within `refresh_margin` of expiry (keeping the old ones
// while they still work if the refresh fails). Thread-safe: concurrent
// callers wait for one resolution.
class DefaultCredentialsChain final : public CredentialsProvider {
 public:
  explicit DefaultCredentialsChain(CredentialChainOptions options = {});
  ~DefaultCredentialsChain() override;

  [[nodiscard]] Result<AwsCredentials> credentials() override;
  void invalidate() override;

 private:
  [[nodiscard]] Result<AwsCredentials> resolve();

  CredentialChainOptions options_;
  std::unique_ptr<HttpTransport> http_;
  std::mutex mu_;
  std::optional<AwsCredentials> cached_;  // guarded by mu_
};

// Parses an ISO 8601 UTC timestamp as the credential endpoints send it
// ("2015-08-30T12:36:00Z", fractional seconds and "+hh:mm" offsets allowed).
[[nodiscard]] std::optional<std::chrono::system_clock::time_point> parse_iso8601(
    std::string_view text);

}  // namespace harvest::sqs
