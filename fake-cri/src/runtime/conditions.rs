//! The runtime's reported status and conditions.

use std::collections::HashMap;

use nodeconform_cri::v1;

use super::state::{Conditions, Runtime, lock};

impl Runtime {
    pub(crate) fn status(&self) -> (v1::RuntimeStatus, HashMap<String, String>) {
        let conditions = lock(&self.conditions).clone();
        let condition = |kind: &str, ready: bool| v1::RuntimeCondition {
            r#type: kind.to_owned(),
            status: ready,
            reason: if ready {
                String::new()
            } else {
                conditions.reason.clone()
            },
            message: if ready {
                String::new()
            } else {
                conditions.message.clone()
            },
        };
        let status = v1::RuntimeStatus {
            conditions: vec![
                condition("RuntimeReady", conditions.runtime_ready),
                condition("NetworkReady", conditions.network_ready),
            ],
        };
        let info = HashMap::from([(
            "config".to_owned(),
            format!(
                "{{\"imagePullDelayMs\":{},\"cgroupDriver\":\"{:?}\"}}",
                self.config.image_pull_delay.as_millis(),
                self.config.cgroup_driver
            ),
        )]);
        (status, info)
    }

    pub(crate) fn set_conditions(&self, update: impl FnOnce(&mut Conditions)) {
        update(&mut lock(&self.conditions));
    }

    pub(crate) fn conditions(&self) -> Conditions {
        lock(&self.conditions).clone()
    }
}
