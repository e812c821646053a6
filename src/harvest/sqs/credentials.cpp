#include <fmt/format.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include <harvest/common/log.hpp>
#include <harvest/sqs/aws_config.hpp>
#include <harvest/sqs/credentials.hpp>
#include <harvest/sqs/http_transport.hpp>

namespace harvest::sqs {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::system_clock;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

Result<std::string> read_file(const std::string& path, std::string_view what) {
  std::ifstream in(path);
  if (!in) return fail(Error::config(fmt::format("cannot read {} {}", what, path)));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return std::string(trim(buffer.str()));
}

// Status and body of a metadata / STS answer in an error message, bounded so
// an HTML error page cannot flood the log.
std::string snippet(std::string_view body) {
  body = trim(body);
  return body.size() > 200 ? std::string(body.substr(0, 200)) + "..." : std::string(body);
}

// 5xx and 429 may pass; any other refusal is the deployment's configuration.
Error http_failure(std::string_view what, const HttpResponse& r) {
  std::string m = fmt::format("{}: HTTP {}: {}", what, r.status, snippet(r.body));
  if (r.status >= 500 || r.status == 429) return Error::transient_error(std::move(m));
  return Error::config(std::move(m));
}

// The JSON shape shared by the container endpoint and IMDS.
Result<AwsCredentials> parse_credentials_json(std::string_view what, std::string_view body,
                                              std::string source) {
  Json j = Json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return fail(Error::transient_error(fmt::format("{}: answer is not JSON", what)));
  if (j.contains("Code") && j["Code"].is_string() && j["Code"] != "Success")
    return fail(Error::transient_error(
        fmt::format("{}: {}: {}", what, j["Code"].get<std::string>(), j.value("Message", ""))));
  AwsCredentials c;
  c.access_key_id = j.value("AccessKeyId", "");
  c.secret_access_key = j.value("SecretAccessKey", "");
  c.session_token = j.value("Token", "");
  c.source = std::move(source);
  if (c.access_key_id.empty() || c.secret_access_key.empty())
    return fail(Error::transient_error(
        fmt::format("{}: answer lacks AccessKeyId or SecretAccessKey", what)));
  if (auto e = j.find("Expiration"); e != j.end() && e->is_string()) {
    c.expiration = parse_iso8601(e->get<std::string>());
    if (!c.expiration)
      return fail(Error::transient_error(
          fmt::format("{}: unreadable Expiration '{}'", what, e->get<std::string>())));
  }
  return c;
}

// The text of the first <tag>...</tag> inside `xml`, XML entities decoded.
std::optional<std::string> xml_element(std::string_view xml, std::string_view tag) {
  std::string open = fmt::format("<{}>", tag), close = fmt::format("</{}>", tag);
  auto b = xml.find(open);
  if (b == std::string_view::npos) return std::nullopt;
  b += open.size();
  auto e = xml.find(close, b);
  if (e == std::string_view::npos) return std::nullopt;
  std::string_view raw = xml.substr(b, e - b);
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '&') {
      out.push_back(raw[i]);
      continue;
    }
    static constexpr std::pair<std::string_view, char> kEntities[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    bool decoded = false;
    for (auto [entity, c] : kEntities) {
      if (raw.substr(i).starts_with(entity)) {
        out.push_back(c);
        i += entity.size() - 1;
        decoded = true;
        break;
      }
    }
    if (!decoded) out.push_back('&');
  }
  return out;
}

bool is_allowed_container_host(const Url& url) {
  if (url.scheme == "https") return true;
  // Plain http only to addresses that cannot leave the host or the task: the
  // token in the Authorization header must not cross a network.
  const std::string& h = url.host;
  return h == "localhost" || h.starts_with("127.") || h == "::1" || h == "169.254.170.2" ||
         h == "169.254.170.23" || h == "fd00:ec2::23";
}

}  // namespace

StaticCredentialsProvider::StaticCredentialsProvider(std::string access_key_id,
                                                     std::string secret_access_key,
                                                     std::string session_token)
    : credentials_{.access_key_id = std::move(access_key_id),
                   .secret_access_key = std::move(secret_access_key),
                   .session_token = std::move(session_token),
                   .source = "static"} {}

std::optional<Clock::time_point> parse_iso8601(std::string_view text) {
  int y, mo, d, h, mi, s;
  int consumed = 0;
  std::string buf(text);
  if (std::sscanf(buf.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s, &consumed) !=
      6)
    return std::nullopt;
  std::string_view rest = std::string_view(buf).substr(consumed);
  if (rest.starts_with('.')) {
    rest.remove_prefix(1);
    while (!rest.empty() && rest.front() >= '0' && rest.front() <= '9') rest.remove_prefix(1);
  }
  std::chrono::seconds offset{0};
  if (rest == "Z" || rest == "z" || rest.empty()) {
  } else if ((rest.front() == '+' || rest.front() == '-') && rest.size() == 6 && rest[3] == ':') {
    int oh = std::atoi(std::string(rest.substr(1, 2)).c_str());
    int om = std::atoi(std::string(rest.substr(4, 2)).c_str());
    offset = std::chrono::hours(oh) + std::chrono::minutes(om);
    if (rest.front() == '-') offset = -offset;
  } else {
    return std::nullopt;
  }
  std::chrono::year_month_day ymd{std::chrono::year(y), std::chrono::month(mo),
                                  std::chrono::day(d)};
  if (!ymd.ok()) return std::nullopt;
  return Clock::time_point(std::chrono::sys_days(ymd)) + std::chrono::hours(h) +
         std::chrono::minutes(mi) + std::chrono::seconds(s) - offset;
}

CredentialsLookup credentials_from_environment() {
  auto key = env("AWS_ACCESS_KEY_ID");
  auto secret = env("AWS_SECRET_ACCESS_KEY");
  if (!key && !secret) return std::nullopt;
  if (!key || !secret)
    return fail(Error::config(
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together; only one is set"));
  return AwsCredentials{.access_key_id = *key,
                        .secret_access_key = *secret,
                        .session_token = env("AWS_SESSION_TOKEN").value_or(""),
                        .source = "environment"};
}

CredentialsLookup credentials_from_profile(const CredentialChainOptions& options) {
  auto profile = load_profile(options.profile);
  if (!profile) return fail(profile.error());
  const std::string where =
      fmt::format("{} / {}", shared_credentials_file_path(), config_file_path());
  if (!profile->found) {
    // Asking for a profile by name that does not exist is a mistake to
    // report; the implicit "default" profile is simply optional.
    bool named = options.profile.has_value() || env("AWS_PROFILE").has_value();
    if (named)
      return fail(
          Error::config(fmt::format("AWS profile '{}' not found in {}", profile->name, where)));
    return std::nullopt;
  }
  auto key = profile->get("aws_access_key_id");
  auto secret = profile->get("aws_secret_access_key");
  if (key && secret) {
    return AwsCredentials{.access_key_id = *key,
                          .secret_access_key = *secret,
                          .session_token = profile->get("aws_session_token").value_or(""),
                          .source = "profile " + profile->name};
  }
  if (key || secret)
    return fail(Error::config(fmt::format(
        "AWS profile '{}' has only one of aws_access_key_id / aws_secret_access_key ({})",
        profile->name, where)));
  if (profile->get("web_identity_token_file")) return std::nullopt;  // the web identity source
  for (const char* unsupported : {"source_profile", "credential_source", "credential_process",
                                  "sso_session", "sso_start_url"}) {
    if (profile->get(unsupported))
      return fail(Error::config(fmt::format(
          "AWS profile '{}' uses {}, which harvest's SQS client does not support; export "
          "credentials into the environment or give the profile static keys",
          profile->name, unsupported)));
  }
  return std::nullopt;
}

CredentialsLookup credentials_from_web_identity(HttpTransport& http,
                                                const CredentialChainOptions& options) {
  auto token_file = env("AWS_WEB_IDENTITY_TOKEN_FILE");
  auto role_arn = env("AWS_ROLE_ARN");
  auto session_name = env("AWS_ROLE_SESSION_NAME");
  if (!token_file && !role_arn) {
    auto profile = load_profile(options.profile);
    if (profile && profile->found) {
      token_file = profile->get("web_identity_token_file");
      role_arn = profile->get("role_arn");
      if (!session_name) session_name = profile->get("role_session_name");
    }
  }
  if (!token_file && !role_arn) return std::nullopt;
  if (!token_file || !role_arn)
    return fail(Error::config(
        "web identity needs both AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN (or the profile's "
        "web_identity_token_file and role_arn)"));
  auto token = read_file(*token_file, "web identity token file");
  if (!token) return fail(token.error());

  std::string endpoint;
  if (options.sts_endpoint) {
    endpoint = *options.sts_endpoint;
  } else if (auto e = env("AWS_ENDPOINT_URL_STS")) {
    endpoint = *e;
  } else if (auto e = env("AWS_ENDPOINT_URL")) {
    endpoint = *e;
  } else if (auto region = options.region ? options.region : resolve_region()) {
    endpoint = fmt::format("https://sts.{}.amazonaws.com", *region);
  } else {
    endpoint = "https://sts.amazonaws.com";
  }
  if (!session_name) {
    session_name = fmt::format("harvest-{}", std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 Clock::now().time_since_epoch())
                                                 .count());
  }

  // AssumeRoleWithWebIdentity is authenticated by the token itself, so the
  // request is not signed (that is what makes it usable as a first step).
  HttpRequest request{
      .method = "POST",
      .url = endpoint,
      .headers = {{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"}},
      .body = fmt::format(
          "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn={}&RoleSessionName={}"
          "&WebIdentityToken={}",
          url_encode(*role_arn), url_encode(*session_name), url_encode(*token)),
      .connect_timeout = options.connect_timeout,
      .timeout = options.timeout};
  const std::string what = fmt::format("STS AssumeRoleWithWebIdentity at {}", endpoint);
  auto response = http.perform(request);
  if (!response) return fail(response.error());
  if (response->status != 200) {
    auto code = xml_element(response->body, "Code");
    auto message = xml_element(response->body, "Message");
    if (code) {
      std::string m = fmt::format("{}: {}: {}", what, *code, message.value_or(""));
      // STS names its retryable refusals; everything else (bad token, role
      // trust policy) is configuration.
      bool retryable = response->status >= 500 || *code == "IDPCommunicationError" ||
                       *code == "Throttling" || *code == "ThrottlingException";
      return fail(retryable ? Error::transient_error(std::move(m)) : Error::config(std::move(m)));
    }
    return fail(http_failure(what, *response));
  }
  auto credentials_xml = xml_element(response->body, "Credentials");
  if (!credentials_xml)
    return fail(Error::transient_error(fmt::format("{}: answer has no Credentials", what)));
  AwsCredentials c{
      .access_key_id = xml_element(*credentials_xml, "AccessKeyId").value_or(""),
      .secret_access_key = xml_element(*credentials_xml, "SecretAccessKey").value_or(""),
      .session_token = xml_element(*credentials_xml, "SessionToken").value_or(""),
      .source = "web identity " + *role_arn};
  if (auto exp = xml_element(*credentials_xml, "Expiration")) c.expiration = parse_iso8601(*exp);
  if (c.access_key_id.empty() || c.secret_access_key.empty())
    return fail(Error::transient_error(fmt::format("{}: incomplete Credentials", what)));
  return c;
}

CredentialsLookup credentials_from_container(HttpTransport& http,
                                             const CredentialChainOptions& options) {
  std::string url;
  // The relative form is ECS's own and wins when both are set, as in the SDKs.
  if (auto relative = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")) {
    url = "http://169.254.170.2" + *relative;
  } else if (auto full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI")) {
    url = *full;
    auto parsed = parse_url(url);
    if (!parsed) return fail(parsed.error());
    if (!is_allowed_container_host(*parsed))
      return fail(Error::config(fmt::format(
          "AWS_CONTAINER_CREDENTIALS_FULL_URI {} must be https, or http to a loopback or "
          "ECS/EKS link-local address",
          url)));
  } else {
    return std::nullopt;
  }
  HttpRequest request{.method = "GET",
                      .url = url,
                      .connect_timeout = options.connect_timeout,
                      .timeout = options.timeout,
                      .bypass_proxy = true};
  std::optional<std::string> token;
  if (auto file = env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")) {
    auto t = read_file(*file, "container authorization token file");
    if (!t) return fail(t.error());
    token = *t;
  } else {
    token = env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  }
  if (token) request.headers.emplace_back("Authorization", *token);
  const std::string what = fmt::format("container credentials at {}", url);
  auto response = http.perform(request);
  if (!response) return fail(response.error());
  if (response->status != 200) return fail(http_failure(what, *response));
  auto c = parse_credentials_json(what, response->body, "container");
  if (!c) return fail(c.error());
  return *c;
}

CredentialsLookup credentials_from_imds(HttpTransport& http,
                                        const CredentialChainOptions& options) {
  if (auto disabled = env("AWS_EC2_METADATA_DISABLED");
      disabled && (*disabled == "true" || *disabled == "TRUE" || *disabled == "True"))
    return std::nullopt;
  auto configured = env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  std::string base =
      configured.value_or(env("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE").value_or("") == "IPv6"
                              ? "http://[fd00:ec2::254]"
                              : "http://169.254.169.254");
  while (base.ends_with('/')) base.pop_back();

  // IMDSv2: a session token first (PUT, so a misconfigured proxy or an SSRF
  // that can only issue GETs cannot obtain one), then the role, then its keys.
  HttpRequest put{.method = "PUT",
                  .url = base + "/latest/api/token",
                  .headers = {{"X-aws-ec2-metadata-token-ttl-seconds", "21600"}},
                  .connect_timeout = options.connect_timeout,
                  .timeout = options.timeout,
                  .bypass_proxy = true};
  auto token = http.perform(put);
  if (!token) {
    // Off EC2 nothing answers at the default address; that means "not
    // configured", not a failure. An explicitly configured endpoint that does
    // not answer is an error.
    if (!configured) return std::nullopt;
    return fail(token.error());
  }
  const std::string what = fmt::format("instance metadata at {}", base);
  if (token->status != 200) return fail(http_failure(what + " (token)", *token));
  const std::string session = std::string(trim(token->body));

  HttpRequest get{.method = "GET",
                  .url = base + "/latest/meta-data/iam/security-credentials/",
                  .headers = {{"X-aws-ec2-metadata-token", session}},
                  .connect_timeout = options.connect_timeout,
                  .timeout = options.timeout,
                  .bypass_proxy = true};
  auto roles = http.perform(get);
  if (!roles) return fail(roles.error());
  // 404: the instance has no instance profile, so IMDS has no credentials.
  if (roles->status == 404) return std::nullopt;
  if (roles->status != 200) return fail(http_failure(what + " (role)", *roles));
  std::string_view list = trim(roles->body);
  std::string role(trim(list.substr(0, list.find('\n'))));
  if (role.empty()) return std::nullopt;

  get.url += role;
  auto creds = http.perform(get);
  if (!creds) return fail(creds.error());
  if (creds->status != 200) return fail(http_failure(what + " (credentials)", *creds));
  auto c = parse_credentials_json(what, creds->body, "instance profile " + role);
  if (!c) return fail(c.error());
  return *c;
}

DefaultCredentialsChain::DefaultCredentialsChain(CredentialChainOptions options)
    : options_(std::move(options)), http_(std::make_unique<HttpTransport>()) {}

DefaultCredentialsChain::~DefaultCredentialsChain() = default;

Result<AwsCredentials> DefaultCredentialsChain::resolve() {
  using Source = CredentialsLookup (*)(HttpTransport&, const CredentialChainOptions&);
  static constexpr std::pair<const char*, Source> kSources[] = {
      {"environment", [](HttpTransport&,
                         const CredentialChainOptions&) { return credentials_from_environment(); }},
      {"profile",
       [](HttpTransport&, const CredentialChainOptions& o) { return credentials_from_profile(o); }},
      {"web identity", credentials_from_web_identity},
      {"container", credentials_from_container},
      {"instance metadata", credentials_from_imds},
  };
  for (const auto& [name, source] : kSources) {
    auto found = source(*http_, options_);
    if (!found) {
      Error e = found.error();
      e.message = fmt::format("AWS credentials ({}): {}", name, e.message);
      return fail(std::move(e));
    }
    if (*found) return std::move(**found);
  }
  return fail(Error::config(
      fmt::format("no AWS credentials found: tried the environment (AWS_ACCESS_KEY_ID / "
                  "AWS_SECRET_ACCESS_KEY), profile '{}' in {} and {}, web identity "
                  "(AWS_WEB_IDENTITY_TOKEN_FILE / AWS_ROLE_ARN), the container endpoint "
                  "(AWS_CONTAINER_CREDENTIALS_*) and EC2 instance metadata",
                  options_.profile.value_or(active_profile_name()), shared_credentials_file_path(),
                  config_file_path())));
}

Result<AwsCredentials> DefaultCredentialsChain::credentials() {
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  if (cached_ && (!cached_->expiration || now + options_.refresh_margin < *cached_->expiration))
    return *cached_;
  auto fresh = resolve();
  if (fresh) {
    cached_ = *fresh;
    return fresh;
  }
  // A failed refresh is survivable while the old credentials still work: the
  // next call tries again, and nothing fails until they truly expire.
  if (cached_ && cached_->expiration && now < *cached_->expiration) {
    log::warn(
        "refreshing AWS credentials from {} failed; using the current ones, valid {} s more: {}",
        cached_->source,
        std::chrono::duration_cast<std::chrono::seconds>(*cached_->expiration - now).count(),
        fresh.error().describe());
    return *cached_;
  }
  return fresh;
}

void DefaultCredentialsChain::invalidate() {
  std::lock_guard lock(mu_);
  cached_.reset();
}

}  // namespace harvest::sqs
