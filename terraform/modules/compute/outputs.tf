output "control_plane_instance_ids" {
  description = "Instance IDs of the control-plane nodes, by index."
  value       = aws_instance.control_plane[*].id
}

output "control_plane_private_ips" {
  description = "Private addresses of the control-plane nodes, by index."
  value       = aws_instance.control_plane[*].private_ip
}

output "control_plane_endpoint" {
  description = "URL of the Kubernetes API as the admin kubeconfig names it."
  value       = "https://${local.api_host}:6443"
}

output "k8s_api_endpoint_parameter" {
  description = "SSM parameter holding the host:port nodes join."
  value       = aws_ssm_parameter.k8s_api_endpoint.name
}

output "worker_autoscaling_group_name" {
  description = "Auto Scaling group of the worker nodes."
  value       = aws_autoscaling_group.workers.name
}

output "control_plane_role_name" {
  description = "IAM role of the control-plane nodes."
  value       = aws_iam_role.control_plane.name
}

output "worker_role_name" {
  description = "IAM role of the worker nodes."
  value       = aws_iam_role.worker.name
}
