# Writes OUT, a C file defining `const char NAME[]` with the bytes of IN (run with cmake -P).
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x[0-9a-f][0-9a-f],){16}" "\\0\n" bytes "${bytes}")
file(WRITE "${OUT}" "/* generated from ${IN} by cmake/embed.cmake */\nconst char ${NAME}[] = {\n${bytes}0x00};\n")
