/* opts.h: reading fields of a Lua options table ({timeout = 5, cwd = "..."})
 * the same way in every C module: nil means "not given", a value of the
 * wrong type raises "<who>: option '<key>' must be a ...". */
#ifndef MK_OPTS_H
#define MK_OPTS_H

#include <stddef.h>
#include <lua.h>

/* t[k] as a string, NULL when nil; *len (if len) gets its length. The
 * string stays valid while the table holds it. */
const char *mk_opt_string(lua_State *L, int t, const char *k, size_t *len, const char *who);
/* t[k] as a number, dflt when nil. */
double mk_opt_number(lua_State *L, int t, const char *k, double dflt, const char *who);
/* Same, and a negative value raises "... must not be negative". */
double mk_opt_nonneg(lua_State *L, int t, const char *k, double dflt, const char *who);

/* t[k] as a boolean: Lua truth, so nil and false are 0. */
int mk_opt_bool(lua_State *L, int t, const char *k);

#endif
