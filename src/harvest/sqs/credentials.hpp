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

/// One set of AWS credentials to sign requests with. A plain value; it
/// holds secrets, so never log it whole.
struct AwsCredentials {
  std::string access_key_id;      ///< the access key id, sent in the signature
  std::string secret_access_key;  ///< the secret key requests are signed with
  /// Empty for long-term keys; sent as X-Amz-Security-Token otherwise.
  std::string session_token;
  /// When temporary credentials stop working; nullopt for long-term keys.
  std::optional<std::chrono::system_clock::time_point> expiration;
  /// Which source produced them ("environment", "profile default", ...), for
  /// logs and error messages. Never the secret.
  std::string source;
};

/// Thread-safe source of credentials to sign with. Held by `shared_ptr`
/// because one provider is shared by every client built from it.
/// A provider lives as long as its last holder; each call hands out a copy
/// the caller owns. Every method may be called from any thread.
class CredentialsProvider {
 public:
  virtual ~CredentialsProvider() = default;
  /// Credentials valid now. Errors: kConfig when no source is configured or a
  /// source is misconfigured, kTransient when a source is unreachable.
  [[nodiscard]] virtual Result<AwsCredentials> credentials() = 0;
  /// Forgets cached credentials (the service called them expired), so the
  /// next `credentials()` resolves afresh. The default does nothing.
  virtual void invalidate() {}
};

/// Fixed credentials, e.g. "x"/"x" for a local emulator. Holds its own copy
/// for its whole life and never changes it, so any thread may call it;
/// `invalidate()` does nothing.
class StaticCredentialsProvider final : public CredentialsProvider {
 public:
  /// Always answers `credentials`, as given.
  explicit StaticCredentialsProvider(AwsCredentials credentials)
      : credentials_(std::move(credentials)) {}
  /// Always answers these keys, with no expiration and source "static".
  StaticCredentialsProvider(std::string access_key_id, std::string secret_access_key,
                            std::string session_token = {});
  /// A copy of the fixed credentials; never fails.
  [[nodiscard]] Result<AwsCredentials> credentials() override { return credentials_; }

 private:
  AwsCredentials credentials_;
};

/// Where and how a DefaultCredentialsChain looks. Copied by the chain at
/// construction.
struct CredentialChainOptions {
  /// Profile to read. Default: AWS_PROFILE, else "default".
  std::optional<std::string> profile;
  /// STS endpoint for web identity. Default: AWS_ENDPOINT_URL_STS, else
  /// AWS_ENDPOINT_URL, else `https://sts.<region>.amazonaws.com` (the global
  /// https://sts.amazonaws.com without a region).
  std::optional<std::string> sts_endpoint;
  /// Region for STS. Default: AWS_REGION, AWS_DEFAULT_REGION, profile.
  std::optional<std::string> region;
  /// Connect / total timeouts for the metadata and STS endpoints. These are
  /// on the path of the first signed call, so they are short. Defaults 1 s / 5 s.
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds timeout{5000};  ///< total timeout; see connect_timeout
  /// Temporary credentials are refreshed this long before they expire.
  /// Default 5 min.
  std::chrono::seconds refresh_margin{300};
};

/// One source of the chain. nullopt: the source is not configured here (the
/// chain moves on). An error: it is configured but failed (the chain stops).
using CredentialsLookup = Result<std::optional<AwsCredentials>>;

/// Source 1: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN).
/// nullopt when neither is set; kConfig when only one is.
[[nodiscard]] CredentialsLookup credentials_from_environment();
/// Source 2: static keys of the active profile (`options.profile`, else
/// AWS_PROFILE, else "default") in the shared credentials and config files.
/// nullopt when the implicit default profile is absent or the profile has no
/// keys (a web identity profile is left to source 3); kConfig for a named
/// profile that does not exist, only one of the two keys, or a profile that
/// needs an unsupported mechanism (source_profile, credential_source,
/// credential_process, SSO).
[[nodiscard]] CredentialsLookup credentials_from_profile(const CredentialChainOptions& options);
/// Source 3: exchanges the web identity token (AWS_WEB_IDENTITY_TOKEN_FILE +
/// AWS_ROLE_ARN, else the profile's web_identity_token_file + role_arn) for
/// temporary credentials through STS AssumeRoleWithWebIdentity at
/// `options.sts_endpoint`, over `http`. nullopt when neither is set. Errors:
/// kConfig when only one is set or STS refuses the token or role; kTransient
/// when STS throttles, fails on its side or answers without credentials; the
/// read error when the token file cannot be read; the transport's error when
/// STS cannot be reached.
[[nodiscard]] CredentialsLookup credentials_from_web_identity(
    HttpTransport& http, const CredentialChainOptions& options);
/// Source 4: the container credentials endpoint
/// (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, which wins, or _FULL_URI, which
/// must be https or http to a loopback or ECS/EKS link-local address), with
/// AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE) as the Authorization header, over
/// `http`. nullopt when no URI is set; an error when the URI is not allowed
/// or the endpoint fails.
[[nodiscard]] CredentialsLookup credentials_from_container(HttpTransport& http,
                                                           const CredentialChainOptions& options);
/// Source 5: EC2 instance metadata, IMDSv2, over `http`. nullopt when
/// AWS_EC2_METADATA_DISABLED is true, when nothing answers at the default
/// address (not on EC2) or when the instance has no instance profile; an
/// error when an explicitly configured AWS_EC2_METADATA_SERVICE_ENDPOINT does
/// not answer or any step fails.
[[nodiscard]] CredentialsLookup credentials_from_imds(HttpTransport& http,
                                                      const CredentialChainOptions& options);

/// The standard chain (see the top of this file). Resolves lazily, on the
/// first `credentials()`; caches the result; re-resolves once temporary
/// credentials are within `refresh_margin` of expiry (keeping the old ones
/// while they still work if the refresh fails). Thread-safe: concurrent
/// callers wait for one resolution.
///
/// Owns its options and the HTTP transport its sources use; holds the cached
/// credentials until it is destroyed. Contacts nothing until the first
/// `credentials()`.
class DefaultCredentialsChain final : public CredentialsProvider {
 public:
  /// A chain that looks as `options` says; resolves nothing yet.
  explicit DefaultCredentialsChain(CredentialChainOptions options = {});
  ~DefaultCredentialsChain() override;

  /// The cached credentials while they are good for more than
  /// `refresh_margin`; otherwise the first configured source's, in chain
  /// order, which are cached. When that refresh fails but the cached ones
  /// have not expired, answers those (with a warning). Errors: a configured
  /// source's (its message prefixed with the source), or kConfig naming every
  /// source tried when none is configured.
  [[nodiscard]] Result<AwsCredentials> credentials() override;
  /// Drops the cached credentials.
  void invalidate() override;

 private:
  [[nodiscard]] Result<AwsCredentials> resolve();

  CredentialChainOptions options_;
  std::unique_ptr<HttpTransport> http_;
  std::mutex mu_;
  std::optional<AwsCredentials> cached_;  ///< guarded by mu_
};

/// Parses an ISO 8601 UTC timestamp as the credential endpoints send it
/// ("2015-08-30T12:36:00Z", fractional seconds and "+hh:mm" offsets allowed).
[[nodiscard]] std::optional<std::chrono::system_clock::time_point> parse_iso8601(
    std::string_view text);

}  // namespace harvest::sqs
