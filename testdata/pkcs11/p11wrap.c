/*
 * p11wrap: a PKCS#11 module that forwards every call to a real module (SoftHSM2 by default)
 * and, on command, makes the token fail, stall or slow down. For quickshake's tests and
 * bench/pkcs11 only.
 *
 * C_GetFunctionList hands out a copy of the real module's function list with a few entries
 * replaced (C_OpenSession, C_Login, C_Sign, C_Decrypt, C_GetMechanismList,
 * C_GetMechanismInfo, C_SignInit, C_DecryptInit); every other entry is the real module's own
 * function, so every call reaches it.
 *
 * Environment:
 *   P11WRAP_MODULE    the real module (default /usr/lib/softhsm/libsofthsm2.so)
 *   P11WRAP_CONTROL   a file read before each replaced call: "ok" (or absent/empty),
 *                     "removed" (CKR_DEVICE_REMOVED from signatures and decryptions,
 *                     CKR_TOKEN_NOT_PRESENT from C_OpenSession), "stall" (the call waits
 *                     until the file says something else)
 *   P11WRAP_DELAY_US  microseconds added to each signature and decryption (a network HSM)
 *   P11WRAP_NO_RAW_DECRYPT=1  C_GetMechanismInfo(CKM_RSA_X_509) leaves out CKF_DECRYPT (a
 *                     token that refuses raw RSA decryption)
 *   P11WRAP_HIDE      mechanisms the token pretends not to have, comma-separated names
 *                     (CKM_RSA_PKCS, CKM_RSA_X_509, CKM_RSA_PKCS_PSS, CKM_ECDSA) or numbers:
 *                     left out of C_GetMechanismList, CKR_MECHANISM_INVALID from
 *                     C_GetMechanismInfo, C_SignInit and C_DecryptInit (a token whose policy
 *                     refuses them, as Google Cloud KMS's library refuses raw RSA)
 *
 * Build: cc -shared -fPIC -O2 -I/usr/include/p11-kit-1 p11wrap.c -o libp11wrap.so -ldl
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <p11-kit/pkcs11.h>

static CK_FUNCTION_LIST real;
static CK_FUNCTION_LIST wrapped;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static CK_RV load_rv = CKR_GENERAL_ERROR;
static long delay_us;

enum mode { MODE_OK, MODE_REMOVED, MODE_STALL };

static enum mode current_mode(void) {
    const char *path = getenv("P11WRAP_CONTROL");
    if (!path || !*path) return MODE_OK;
    FILE *f = fopen(path, "r");
    if (!f) return MODE_OK;
    char buf[32] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (strncmp(buf, "removed", 7) == 0) return MODE_REMOVED;
    if (strncmp(buf, "stall", 5) == 0) return MODE_STALL;
    return MODE_OK;
}

/* Waits out a stall; returns the mode that ended it. */
static enum mode gate(void) {
    enum mode m;
    while ((m = current_mode()) == MODE_STALL) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return m;
}

static void add_delay(void) {
    if (delay_us <= 0) return;
    struct timespec ts = {delay_us / 1000000, (delay_us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static CK_RV w_open_session(CK_SLOT_ID slot, CK_FLAGS flags, void *app, CK_NOTIFY notify,
                            CK_SESSION_HANDLE_PTR session) {
    if (gate() == MODE_REMOVED) return CKR_TOKEN_NOT_PRESENT;
    return real.C_OpenSession(slot, flags, app, notify, session);
}

static CK_RV w_login(CK_SESSION_HANDLE s, CK_USER_TYPE user, CK_UTF8CHAR_PTR pin, CK_ULONG len) {
    if (gate() == MODE_REMOVED) return CKR_DEVICE_REMOVED;
    return real.C_Login(s, user, pin, len);
}

static CK_RV w_sign(CK_SESSION_HANDLE s, CK_BYTE_PTR data, CK_ULONG len, CK_BYTE_PTR sig,
                    CK_ULONG_PTR sig_len) {
    if (sig != NULL) {
        if (gate() == MODE_REMOVED) return CKR_DEVICE_REMOVED;
        add_delay();
    }
    return real.C_Sign(s, data, len, sig, sig_len);
}

static CK_RV w_decrypt(CK_SESSION_HANDLE s, CK_BYTE_PTR in, CK_ULONG len, CK_BYTE_PTR out,
                       CK_ULONG_PTR out_len) {
    if (out != NULL) {
        if (gate() == MODE_REMOVED) return CKR_DEVICE_REMOVED;
        add_delay();
    }
    return real.C_Decrypt(s, in, len, out, out_len);
}

#define MAX_HIDDEN 16
static CK_MECHANISM_TYPE hidden[MAX_HIDDEN];
static int n_hidden;

static void parse_hidden(void) {
    const char *env = getenv("P11WRAP_HIDE");
    if (!env) return;
    static const struct {
        const char *name;
        CK_MECHANISM_TYPE type;
    } names[] = {
        {"CKM_RSA_PKCS_PSS", CKM_RSA_PKCS_PSS},
        {"CKM_RSA_PKCS", CKM_RSA_PKCS},
        {"CKM_RSA_X_509", CKM_RSA_X_509},
        {"CKM_ECDSA", CKM_ECDSA},
    };
    char buf[512];
    snprintf(buf, sizeof buf, "%s", env);
    for (char *save = NULL, *tok = strtok_r(buf, ", ", &save); tok && n_hidden < MAX_HIDDEN;
         tok = strtok_r(NULL, ", ", &save)) {
        int found = 0;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            if (strcmp(tok, names[i].name) == 0) {
                hidden[n_hidden++] = names[i].type;
                found = 1;
                break;
            }
        }
        if (!found) hidden[n_hidden++] = (CK_MECHANISM_TYPE)strtoul(tok, NULL, 0);
    }
}

static int is_hidden(CK_MECHANISM_TYPE t) {
    for (int i = 0; i < n_hidden; i++)
        if (hidden[i] == t) return 1;
    return 0;
}

static CK_RV w_mechanism_list(CK_SLOT_ID slot, CK_MECHANISM_TYPE_PTR list, CK_ULONG_PTR count) {
    if (!count) return CKR_ARGUMENTS_BAD;
    CK_ULONG n = 0;
    CK_RV rv = real.C_GetMechanismList(slot, NULL, &n);
    if (rv != CKR_OK) return rv;
    CK_MECHANISM_TYPE *all = calloc(n ? n : 1, sizeof *all);
    if (!all) return CKR_HOST_MEMORY;
    rv = real.C_GetMechanismList(slot, all, &n);
    if (rv != CKR_OK) {
        free(all);
        return rv;
    }
    CK_ULONG kept = 0;
    for (CK_ULONG i = 0; i < n; i++)
        if (!is_hidden(all[i])) all[kept++] = all[i];
    if (list) {
        if (*count < kept) {
            *count = kept;
            free(all);
            return CKR_BUFFER_TOO_SMALL;
        }
        memcpy(list, all, kept * sizeof *all);
    }
    *count = kept;
    free(all);
    return CKR_OK;
}

static CK_RV w_sign_init(CK_SESSION_HANDLE s, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE key) {
    if (m && is_hidden(m->mechanism)) return CKR_MECHANISM_INVALID;
    return real.C_SignInit(s, m, key);
}

static CK_RV w_decrypt_init(CK_SESSION_HANDLE s, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE key) {
    if (m && is_hidden(m->mechanism)) return CKR_MECHANISM_INVALID;
    return real.C_DecryptInit(s, m, key);
}

static CK_RV w_mechanism_info(CK_SLOT_ID slot, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO_PTR info) {
    if (is_hidden(type)) return CKR_MECHANISM_INVALID;
    CK_RV rv = real.C_GetMechanismInfo(slot, type, info);
    const char *no = getenv("P11WRAP_NO_RAW_DECRYPT");
    if (rv == CKR_OK && info && type == CKM_RSA_X_509 && no && *no == '1') {
        info->flags &= ~(CK_FLAGS)CKF_DECRYPT;
    }
    return rv;
}

static void load(void) {
    const char *path = getenv("P11WRAP_MODULE");
    if (!path || !*path) path = "/usr/lib/softhsm/libsofthsm2.so";
    const char *d = getenv("P11WRAP_DELAY_US");
    delay_us = d ? atol(d) : 0;
    parse_hidden();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "p11wrap: cannot load %s: %s\n", path, dlerror());
        return;
    }
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList");
    CK_FUNCTION_LIST_PTR list = NULL;
    if (!get || get(&list) != CKR_OK || !list) return;
    real = *list;
    wrapped = *list;
    wrapped.C_OpenSession = w_open_session;
    wrapped.C_Login = w_login;
    wrapped.C_Sign = w_sign;
    wrapped.C_Decrypt = w_decrypt;
    wrapped.C_GetMechanismInfo = w_mechanism_info;
    wrapped.C_GetMechanismList = w_mechanism_list;
    wrapped.C_SignInit = w_sign_init;
    wrapped.C_DecryptInit = w_decrypt_init;
    load_rv = CKR_OK;
}

CK_RV C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR out) {
    if (!out) return CKR_ARGUMENTS_BAD;
    pthread_once(&once, load);
    if (load_rv != CKR_OK) return load_rv;
    *out = &wrapped;
    return CKR_OK;
}
