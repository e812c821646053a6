// ENG-12: the one mapping from error kinds to HTTP status codes.
#include <gtest/gtest.h>

#include <harvest/api/handlers.hpp>
#include <harvest/api/http_status.hpp>

namespace harvest::api {
namespace {

TEST(HttpStatus, every_error_kind_maps_to_its_status) {
  EXPECT_EQ(http_status(ErrorKind::kBadRequest), 400);
  EXPECT_EQ(http_status(ErrorKind::kNotFound), 404);
  EXPECT_EQ(http_status(ErrorKind::kInvalidInput), 422);
  EXPECT_EQ(http_status(ErrorKind::kConflict), 409);
  EXPECT_EQ(http_status(ErrorKind::kTransient), 503);
  EXPECT_EQ(http_status(ErrorKind::kConfig), 500);
  EXPECT_EQ(http_status(ErrorKind::kInternal), 500);
}

TEST(HttpStatus, error_body_names_kind_and_message_and_transient_says_when_to_retry) {
  auto r = error_response(Error::transient_error("pool exhausted"));
  EXPECT_EQ(r.status, 503);
  // A 5xx answer names the kind only; the cause is for the log.
  EXPECT_EQ(Json::parse(r.body),
            (Json{{"error", "transient"},
                  {"message", "the service is temporarily unavailable; retry later"}}));
  EXPECT_EQ(r.log_detail, "transient: pool exhausted");
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0], std::make_pair(std::string("Retry-After"), std::string("1")));

  auto bad = error_response(Error::invalid_input("field 'name' must be a string"));
  EXPECT_EQ(bad.status, 422);
  EXPECT_EQ(Json::parse(bad.body)["error"], "invalid_input");
  EXPECT_TRUE(bad.headers.empty());
}

TEST(HttpStatus, invalid_utf8_in_a_message_is_replaced_not_thrown) {
  auto r = error_response(Error::not_found("no execution \xff\xfe"));
  EXPECT_EQ(r.status, 404);
  Json parsed;
  EXPECT_NO_THROW(parsed = Json::parse(r.body));
  EXPECT_EQ(parsed["error"], "not_found");
}

}  // namespace
}  // namespace harvest::api
