//! API keys: `Authorization: Bearer <key>`.
//!
//! Configuration (Worker secrets): `API_KEYS` is a JSON object mapping each
//! key to its tenant (`{"sk_live_...": "acme"}`); `ADMIN_KEY` is the one key
//! for admin routes, never a tenant key. Keys are compared in constant time:
//! the presented key and every configured key are hashed with SHA-256 and the
//! digests compared with a branch-free byte fold over *all* configured keys,
//! so neither the position of the first differing byte nor which key matched
//! shows in the timing.

use sha2::{Digest, Sha256};

use crate::names::check_tenant;
use crate::problem::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub struct ApiKeys {
    tenants: Vec<([u8; 32], String)>,
    admin: Option<[u8; 32]>,
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

fn ct_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut diff = 0u8;
    for i in 0..32 {
        diff |= a[i] ^ b[i];
    }
    diff == 0
}

/// The key of an `Authorization: Bearer <key>` header.
fn bearer(header: Option<&str>) -> Option<&str> {
    let h = header?.trim();
    let (scheme, key) = h.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let key = key.trim();
    (!key.is_empty()).then_some(key)
}

impl ApiKeys {
    /// From the `API_KEYS` JSON text and the `ADMIN_KEY`, either possibly unset.
    pub fn parse(api_keys: Option<&str>, admin_key: Option<&str>) -> Result<ApiKeys, ConfigError> {
        let mut tenants = Vec::new();
        if let Some(text) = api_keys {
            let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)
                .map_err(|e| {
                    ConfigError(format!(
                        "API_KEYS must be a JSON object of key → tenant: {e}"
                    ))
                })?;
            for (key, tenant) in map {
                let tenant = tenant
                    .as_str()
                    .ok_or_else(|| ConfigError("API_KEYS: every tenant must be a string".into()))?;
                check_tenant(tenant).map_err(|e| ConfigError(format!("API_KEYS: {e}")))?;
                if key.len() < 16 {
                    return Err(ConfigError(
                        "API_KEYS: keys must be at least 16 bytes".into(),
                    ));
                }
                tenants.push((digest(&key), tenant.to_owned()));
            }
        }
        let admin = match admin_key {
            Some(k) if k.len() < 16 => {
                return Err(ConfigError("ADMIN_KEY must be at least 16 bytes".into()))
            }
            Some(k) => Some(digest(k)),
            None => None,
        };
        if let Some(a) = &admin {
            if tenants.iter().any(|(d, _)| ct_eq(d, a)) {
                return Err(ConfigError(
                    "ADMIN_KEY must not also be a tenant key".into(),
                ));
            }
        }
        Ok(ApiKeys { tenants, admin })
    }

    /// The tenant of the presented key, or `401`.
    pub fn tenant(&self, authorization: Option<&str>) -> Result<String, ApiError> {
        let d = digest(bearer(authorization).ok_or(ApiError::Unauthorized)?);
        let mut found: Option<&str> = None;
        for (k, t) in &self.tenants {
            // No early exit: every key is compared.
            if ct_eq(k, &d) && found.is_none() {
                found = Some(t);
            }
        }
        found.map(str::to_owned).ok_or(ApiError::Unauthorized)
    }

    /// Ok for the admin key; `401` for no or an unknown key, `403` for a
    /// tenant key, `503` when no admin key is configured.
    pub fn admin(&self, authorization: Option<&str>) -> Result<(), ApiError> {
        let Some(admin) = &self.admin else {
            return Err(ApiError::Unavailable {
                detail: "admin routes are disabled: ADMIN_KEY is not set".into(),
            });
        };
        let d = digest(bearer(authorization).ok_or(ApiError::Unauthorized)?);
        if ct_eq(admin, &d) {
            return Ok(());
        }
        if self.tenant(authorization).is_ok() {
            return Err(ApiError::Forbidden);
        }
        Err(ApiError::Unauthorized)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &str = r#"{"key-acme-0123456789":"acme","key-globex-012345678":"globex"}"#;
    const ADMIN: &str = "admin-key-0123456789";

    #[test]
    fn keys_map_to_tenants() {
        let k = ApiKeys::parse(Some(KEYS), Some(ADMIN)).unwrap();
        assert_eq!(
            k.tenant(Some("Bearer key-acme-0123456789")).unwrap(),
            "acme"
        );
        assert_eq!(
            k.tenant(Some("bearer key-globex-012345678")).unwrap(),
            "globex"
        );
        for bad in [
            None,
            Some(""),
            Some("Bearer"),
            Some("Bearer "),
            Some("Basic key-acme-0123456789"),
            Some("Bearer key-acme-012345678"),
            Some("Bearer key-acme-0123456789x"),
            Some("key-acme-0123456789"),
            Some("Bearer admin-key-0123456789"),
        ] {
            assert_eq!(k.tenant(bad), Err(ApiError::Unauthorized), "{bad:?}");
        }
    }

    #[test]
    fn admin_is_separate() {
        let k = ApiKeys::parse(Some(KEYS), Some(ADMIN)).unwrap();
        assert_eq!(k.admin(Some("Bearer admin-key-0123456789")), Ok(()));
        assert_eq!(
            k.admin(Some("Bearer key-acme-0123456789")),
            Err(ApiError::Forbidden)
        );
        assert_eq!(
            k.admin(Some("Bearer nope-nope-nope-nope")),
            Err(ApiError::Unauthorized)
        );
        assert_eq!(k.admin(None), Err(ApiError::Unauthorized));
        let none = ApiKeys::parse(Some(KEYS), None).unwrap();
        assert!(matches!(
            none.admin(Some("Bearer admin-key-0123456789")),
            Err(ApiError::Unavailable { .. })
        ));
    }

    #[test]
    fn bad_config_is_refused() {
        assert!(ApiKeys::parse(Some("[]"), None).is_err());
        assert!(ApiKeys::parse(Some(r#"{"key-acme-0123456789":1}"#), None).is_err());
        assert!(ApiKeys::parse(Some(r#"{"key-acme-0123456789":"a.b"}"#), None).is_err());
        assert!(ApiKeys::parse(Some(r#"{"short":"acme"}"#), None).is_err());
        assert!(ApiKeys::parse(Some(KEYS), Some("key-acme-0123456789")).is_err());
        assert!(ApiKeys::parse(None, Some("short")).is_err());
        // Nothing configured: every request is 401.
        let k = ApiKeys::parse(None, None).unwrap();
        assert_eq!(
            k.tenant(Some("Bearer key-acme-0123456789")),
            Err(ApiError::Unauthorized)
        );
    }
}
