#!/usr/bin/env bash
# Requirement ids resolve: every engine, connector, Kafka or SQS requirement
# id cited anywhere under src/ or tests/ is defined in docs/requirements.md,
# no id is defined there twice, and every test that page names still exists.
# Prints each problem as file:line and exits 1 if there is any.
#   tests/ops/requirement_ids_test.sh [SOURCE_DIR]   (ctest: lint.requirement_ids)
set -euo pipefail
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cd "$root"
doc=docs/requirements.md
id='(ENG|CON|KAF|SQS)-[0-9]+'
fail=0

if [[ ! -f $doc ]]; then
  echo "$doc: missing"
  exit 1
fi

# Defined: an entry is a top-level bullet that opens with the bold id.
defs=$(grep -noE "^- \*\*${id}\*\*" "$doc" | sed -E 's/^([0-9]+):- \*\*(.*)\*\*$/\1 \2/')

# 1. Each id defined once.
dups=$(awk '{ if ($2 in first) print "'"$doc"':" $1 ": " $2 " is defined again (first at line " first[$2] ")";
              else first[$2] = $1 }' <<<"$defs")
if [[ -n $dups ]]; then
  echo "$dups"
  fail=1
fi

# 2. Each cited id defined. The browser tests' npm packages are not ours.
cited=$(grep -rnoIE --exclude-dir=node_modules "\b${id}\b" src tests || true)
undefined=$(awk 'NR == FNR { defined[$2] = 1; next }
                 { n = split($0, f, ":"); if (!(f[n] in defined))
                     print f[1] ":" f[2] ": " f[n] " is not defined in '"$doc"'" }' \
              <(echo "$defs") <(echo "$cited"))
if [[ -n $undefined ]]; then
  echo "$undefined"
  fail=1
fi

# 3. Each test the page names exists: `file: Suite.test` names a GoogleTest
# whose suite and name appear in that file; `ctest: name` a test some
# CMakeLists.txt under tests/ registers.
while IFS= read -r line; do
  lineno=${line%%:*}
  ref=${line#*:}
  ref=${ref#\`}
  ref=${ref%\`}
  if [[ $ref == ctest:* ]]; then
    name=${ref#ctest: }
    if ! grep -rqE --include=CMakeLists.txt "NAME[[:space:]]+${name//./\\.}([[:space:]]|\)|$)" tests; then
      echo "$doc:$lineno: no ctest named $name"
      fail=1
    fi
  else
    file=${ref%%: *}
    test=${ref#*: }
    suite=${test%%.*}
    name=${test#*.}
    if [[ ! -f $file ]]; then
      echo "$doc:$lineno: $file does not exist"
      fail=1
    elif ! grep -qw -- "$suite" "$file" || ! grep -qw -- "$name" "$file"; then
      echo "$doc:$lineno: $file has no test $suite.$name"
      fail=1
    fi
  fi
done < <(grep -noE '`(tests/[^`:]+: [A-Za-z0-9_]+\.[A-Za-z0-9_]+|ctest: [A-Za-z0-9_.]+)`' "$doc")

ndef=$(grep -c . <<<"$defs" || true)
ncited=$(awk -F: 'NF { print $NF }' <<<"$cited" | sort -u | grep -c . || true)
if [[ $fail -eq 0 ]]; then
  echo "requirement ids: $ncited cited in src/ and tests/, $ndef defined once each in $doc, every named test exists"
fi
exit $fail
